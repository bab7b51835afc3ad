// Shrinking a failing property case, then explaining the smallest one that
// still says which bug it is.
#include <algorithm>
#include <chrono>
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
// one that tells the coinciding bugs apart; and, when the first failure
// itself fits several, for one that fits only one of them (a twist that
// tells them apart is on in a fraction of the draws: more are looked at).
constexpr int kScan = 20;
constexpr int kScanApart = 200;

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
    // A second shrink, from property case `from`, keeping only cases that
    // still tell the bugs `want` from the `rivals`; and, when it holds up,
    // that case becomes the one reported (its look, its steps, the shrink's
    // effort added to the first's).
    struct Sharpened {
        std::unique_ptr<Look> look;
        gen::Shrunk shrunk;
        gen::CaseSpec spec;
    };
    auto sharpen = [&](int from, const std::vector<std::string>& want, const std::vector<std::string>& rivals) {
        Sharpened r;
        r.spec = shrink_while(
            impl, stream, from, dtype,
            [&](const Case& c, const NamedD& obs) { return discriminates(c, dtype, obs, want, rivals); }, truths,
            limits, &r.shrunk);
        r.look = look(impl, r.spec, dtype, truths);
        return r;
    };
    auto adopt = [&](Sharpened r) {
        best = std::move(r.look);
        steps = r.shrunk.steps;
        sh.tried += r.shrunk.tried, sh.seconds += r.shrunk.seconds;
        if (r.shrunk.stopped != gen::Shrunk::Stop::done) sh.stopped = r.shrunk.stopped;
        if (reported) *reported = r.spec;
    };
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
    // Bugs that explain every case looked at so far alike: a later failing
    // case of the run where exactly one of them explains the output tells
    // them apart (a window against a longer context, a sequence across a page
    // boundary). It is shrunk while it still does, and reported. Every one of
    // `alike` explains the first failure, so whichever is named there is
    // consistent with it.
    auto tell_apart = [&](const std::vector<std::string>& alike, const std::string& why) -> bool {
        // Bounded like a shrink (--shrink-time): each later case costs a run and a few references.
        const auto start = std::chrono::steady_clock::now();
        auto spent = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
        for (int j = index + 1; j <= index + kScanApart; ++j) {
            if (limits.max_seconds > 0 && spent() > limits.max_seconds) break;
            std::optional<Later> l = failing_later(j);
            if (!l) continue;
            std::vector<std::string> named;
            for (const auto& id : alike)
                if (discriminates(l->c, dtype, l->out.outputs, {id}, {})) named.push_back(id);
            if (named.size() != 1) continue;
            std::vector<std::string> rivals;
            for (const auto& id : alike)
                if (id != named[0]) rivals.push_back(id);
            Sharpened found = sharpen(j, named, rivals);
            const Look& l2 = *found.look;
            bool apart = l2.out.error.empty() && !l2.r.pass && has(l2.d.ids(), named[0]);
            for (const auto& id : rivals) apart = apart && !has(l2.d.ids(), id);
            if (!apart) continue;
            notes.push_back(fmt::format("{}: {} explain it alike; property case {} of this run tells them apart, and "
                                        "is reported here",
                                        why, join(alike), j));
            adopt(std::move(found));
            return true;
        }
        return false;
    };
    // Whether the output on `on` rules the bug `id` out (see "Names only when earned" below).
    const std::string failing_tensor = failed.first_failing.empty() ? "out" : failed.first_failing;
    auto contradicted_on = [&](const Case& on, const NamedD& seen, const std::string& id, bool of_its_kind) {
        // (A poisoned row's read is judged like any hypothesis: its NaNs must
        // carry the poison, and the mechanism's reference reproduce the rest.)
        // Lower precision, too, must hold: on the case it is named by, its
        // error must be that precision's kind, not merely under its bound.
        if (id == "precision_downgrade") return !explained_by_precision(on, dtype, seen, failing_tensor, of_its_kind);
        bool listed = false;
        for (const Hypothesis& h : hypotheses(on)) {
            if (h.id != id) continue;
            listed = true;
            if (conforms_under(on, dtype, seen, h)) return false;
        }
        return listed;  // a fitted theta is not in the list: nothing to contradict it with
    };
    if (small_ids.size() != 1 && failed.error.empty() && unshrunk.c) {
        const Diagnosis& du = unshrunk_diagnosis();
        std::vector<std::string> want = du.ids();
        int from = index;  // the property case the sharper diagnosis comes from
        bool sharper = !want.empty() && (small_ids.empty() || want.size() < small_ids.size());
        if (!sharper && small_ids.empty() && want.empty()) {
            // Nothing named on the case or anything it shrinks to: it may be
            // too small to tell (a lower precision needs a few dozen
            // elements to be told from a small logic error). A later failing
            // case of the run, diagnosed in full, may name one bug.
            for (int j = index + 1; j <= index + kScan && !sharper; ++j) {
                std::optional<Later> l = failing_later(j);
                if (!l) continue;
                const std::vector<std::string> named = diagnose(l->c, dtype, l->out.outputs, l->r, l->truth.get()).ids();
                // A name the first failure rules out is a degenerate draw's
                // (a near one-hot softmax fits several mask bugs): look on.
                if (named.size() == 1 && !contradicted_on(*unshrunk.c, *unshrunk.observed, named[0], false)) {
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
        // A bug that explains the drawn case but that the smallest failing
        // case rules out (the same kernel failed there, and the output does
        // not conform under it) is not the kernel's bug: a window that hid
        // another mask's error on the drawn case. (Ruled out, not merely
        // unnamed: a lower precision is too small to name on a tiny case,
        // yet holds there.)
        std::vector<std::string> ruled_out;
        if (sharper && from == index && small_ids.empty()) {
            std::vector<std::string> kept;
            for (const auto& id : want)
                (contradicted_on(best->c, best->out.outputs, id, false) ? ruled_out : kept).push_back(id);
            want = kept;
            sharper = !want.empty();
        }
        Diagnosis held = du;  // the drawn case's diagnosis, less what a smaller case rules out
        held.matches.clear();
        for (const auto& m : du.matches)
            if (!has(ruled_out, m.id)) held.matches.push_back(m);
        auto ruled_out_note = [&] {
            if (!ruled_out.empty())
                notes.push_back(fmt::format("candidates, not the diagnosis: {} explain{} the case as drawn ({}), "
                                            "but a smaller failing case contradicts {} ({})",
                                            join(ruled_out), ruled_out.size() == 1 ? "s" : "", unshrunk.c->id,
                                            ruled_out.size() == 1 ? "it" : "them", best->c.id));
        };
        ruled_out_note();
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
            Sharpened sharp = sharpen(from, want, rivals);
            const Look& l = *sharp.look;
            if (l.out.error.empty() && !l.r.pass && l.d.ids() == want) {
                adopt(std::move(sharp));
            } else if (from == index) {
                notes.clear();
                ruled_out_note();
                const bool told = held.ids().size() > 1 &&
                                  tell_apart(held.ids(), fmt::format("the first failing case, {}, and all it shrinks to",
                                                                     unshrunk.c->id));
                if (!told && !held.matches.empty()) {
                    CaseResult r = failed;
                    notes.push_back(fmt::format("smaller cases fail too, but {} (e.g. {})", coincide, best->c.id));
                    annotate(r, held, unshrunk, &impl, "the output", notes);
                    if (reported) *reported = gen::draw(stream, index);
                    return finish(r, 0, r.seconds);
                }
            } else {
                notes.clear();  // the later case did not hold up: report the ambiguity as it is
            }
        }
    }
    // Names only when earned: a hypothesis that explains the shrunk case but
    // that the case it was drawn as contradicts (its output does not conform
    // there under any of the hypothesis's variants) is a candidate, not the
    // diagnosis: on a small enough case several bugs coincide with almost
    // anything. (A drawn case that merely cannot tell the hypothesis from the
    // config, a marginal failure, contradicts nothing.) A name taken from a
    // later case must hold on the first failure as well: the bug behind both
    // is one, and a later case at a degenerate draw (a near one-hot softmax)
    // fits bugs the first failure rules out.
    auto contradicted = [&](const std::string& id) {
        if (named_on)
            return contradicted_on(*named_on, named_out, id, true) ||
                   contradicted_on(*unshrunk.c, *unshrunk.observed, id, false);
        return contradicted_on(*unshrunk.c, *unshrunk.observed, id, true);
    };
    auto earn = [&](Diagnosis d, std::vector<std::string>& candidates) {
        std::vector<HypothesisMatch> kept;
        for (const auto& m : d.matches) {
            if (!contradicted(m.id)) kept.push_back(m);
            else if (!has(candidates, m.id)) candidates.push_back(m.id);
        }
        d.matches = kept;
        return d;
    };
    Diagnosis earned = best->d;
    if (failed.error.empty() && unshrunk.c && !earned.matches.empty()) {
        std::vector<std::string> candidates;
        earned = earn(best->d, candidates);
        // The shrink went too far: it reached a case where the bug coincides
        // with another that the drawn case rules out (a window applied from a
        // chunk's first query is one key too wide at W = 1 and two queries).
        // When the drawn case names bugs of its own, shrink it again keeping
        // only cases where those still explain the failure and the coinciding
        // ones do not, and report that case.
        if (earned.matches.empty() && !named_on) {
            std::vector<std::string> want;
            for (const auto& id : unshrunk_diagnosis().ids())
                if (!has(candidates, id)) want.push_back(id);
            if (!want.empty()) {
                Sharpened sharp = sharpen(index, want, candidates);
                const Look& l = *sharp.look;
                std::vector<std::string> again;
                Diagnosis d = l.out.error.empty() && !l.r.pass ? earn(l.d, again) : Diagnosis{};
                bool holds = !d.matches.empty();
                for (const auto& id : d.ids()) holds = holds && has(want, id);
                if (holds) {
                    notes.push_back(fmt::format("smaller cases fail too, but there {} coincide{} with {} ({}), which "
                                                "the case as drawn rules out; the smallest case that still tells "
                                                "them apart is reported",
                                                join(want), want.size() == 1 ? "s" : "", join(candidates), best->c.id));
                    adopt(std::move(sharp));
                    earned = d;
                    candidates.clear();
                }
            }
        }
        if (earned.ids().size() > 1 && !named_on &&
            tell_apart(earned.ids(), fmt::format("the first failing case, {}, and all it shrinks to", unshrunk.c->id)))
            earned = earn(best->d, candidates);
        if (!candidates.empty())
            notes.push_back(fmt::format("candidates, not the diagnosis: {} explain{} the shrunk case, but the "
                                        "case it was drawn as contradicts {} ({})",
                                        join(candidates), candidates.size() == 1 ? "s" : "",
                                        candidates.size() == 1 ? "it" : "them",
                                        named_on ? fmt::format("{}, or the first failure, {}", named_on->id, unshrunk.c->id)
                                                 : unshrunk.c->id));
    }
    CaseResult res = best->r;
    annotate(res, earned, {&best->c, &best->out.outputs, best->truth.get()}, &impl, "the output", notes);
    return finish(res, steps, best->out.seconds);
}

}  // namespace conform::diagnose
