#include "run/mutants.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>

#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "report/report.h"

namespace conform::run {

namespace {

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// Property case `index` of `op`, and its reference: the same for every mutant,
// so computed once.
struct Drawn {
    Case c;
    std::unique_ptr<Truth> truth;
};

template <class F>
int count(const MutantsRun& r, F f) {
    return static_cast<int>(std::count_if(r.outcomes.begin(), r.outcomes.end(), f));
}

}  // namespace

int MutantsRun::killed() const {
    return count(*this, [](const MutantOutcome& m) { return m.killed(); });
}
int MutantsRun::diagnosed() const {
    return count(*this, [](const MutantOutcome& m) { return m.correct(); });
}
int MutantsRun::misnamed() const {
    return count(*this, [](const MutantOutcome& m) { return m.misnamed(); });
}
int MutantsRun::unnamed() const {
    return count(*this, [](const MutantOutcome& m) { return m.unnamed(); });
}

MutantsRun run_mutants(const std::vector<const ImplEntry*>& mutants, int cases, uint64_t seed, std::ostream& err) {
    const auto t0 = std::chrono::steady_clock::now();
    MutantsRun r;
    r.seed = seed;
    r.cases = cases;
    std::map<std::pair<Op, int>, Drawn> drawn;
    auto draw = [&](Op op, int i) -> Drawn& {
        auto it = drawn.find({op, i});
        if (it != drawn.end()) return it->second;
        Drawn d{property_case(gen::draw(op, seed, i), DType::f32), nullptr};
        return drawn.emplace(std::make_pair(op, i), std::move(d)).first->second;
    };

    std::vector<MutantOutcome>& outcomes = r.outcomes;
    for (const ImplEntry* e : mutants) {
        MutantOutcome m;
        m.entry = e;
        // A mutant that cannot run here is not killed: it counts against the power.
        std::unique_ptr<Implementation> impl;
        try {
            const Availability a = e->available();
            if (!a.available) throw ImplError(a.reason);
            impl = e->create(ImplOptions{});
        } catch (const std::exception& ex) {
            err << "conform mutants: " << e->name << " cannot run: " << ex.what() << "\n";
            outcomes.push_back(std::move(m));
            continue;
        }
        // Case i of every op the bug reaches, then case i + 1: the first kill is
        // the first failure a user running those ops would meet. Each op stops
        // at its own first kill; an op the bug never shows in runs all cases.
        std::vector<Op> alive = e->ops;
        for (int i = 0; i < cases && !alive.empty(); ++i) {
            for (Op op : std::vector<Op>(alive)) {
                Drawn& d = draw(op, i);
                if (!impl->supports(op, d.c.config).ok) continue;
                if (!m.killed()) ++m.cases_run;
                if (!d.truth) d.truth = std::make_unique<Truth>(reference_truth(d.c, DType::f32));
                const Judged j = run_and_judge(*impl, e->name, d.c, DType::f32, *d.truth);
                if (j.result.pass) continue;
                Kill k{op,
                       i,
                       diagnose::shrink_and_explain(*impl, gen::Stream{op, seed, std::nullopt, {}, 0}, i, DType::f32,
                                                    {&d.c, &j.out.outputs, d.truth.get()}, j.result),
                       {}};
                k.failure.replay = "build/conform --impl " + e->name + " --case '" + k.failure.case_id + "'";
                for (const auto& h : k.failure.hypotheses)
                    if (std::find(k.named.begin(), k.named.end(), h.id) == k.named.end()) k.named.push_back(h.id);
                m.kills.push_back(std::move(k));
                alive.erase(std::find(alive.begin(), alive.end(), op));
            }
        }
        outcomes.push_back(std::move(m));
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

std::string mutants_table(const MutantsRun& r) {
    const int correct = r.diagnosed();
    std::string s;
    s += fmt::format("\n{:<28} {:<7} {:>6}  {:<30} {:<8} {}\n", "mutant", "killed", "cases", "diagnosis", "correct",
                     "ops killed (and named)");
    for (const auto& m : r.outcomes) {
        std::string named = "-", verdict = "NO", ops;
        if (m.killed()) {
            const Kill& first = m.kills.front();
            named = first.named.empty() ? "none" : join(first.named);
            if (m.correct()) verdict = first.named.size() == 1 ? "yes" : "yes*";
        }
        for (Op op : m.entry->ops) {
            auto k = std::find_if(m.kills.begin(), m.kills.end(), [&](const Kill& x) { return x.op == op; });
            ops += std::string(ops.empty() ? "" : " ") + to_string(op) +
                   (k == m.kills.end() ? "(-)"
                    : m.names_me(*k)   ? ""
                                       : "(misnamed: " + join(k->named) + ")");
        }
        s += fmt::format("{:<28} {:<7} {:>6}  {:<30} {:<8} {}\n", m.entry->name, m.killed() ? "yes" : "NO",
                         m.killed() ? std::to_string(m.cases_run) : fmt::format(">{}", m.cases_run), named, verdict,
                         ops);
    }
    s += "(cases: property cases run until the first kill; ops: (-) never failed there, the bug does not "
         "show through that op's cases; yes*: named among coinciding hypotheses)\n";
    const size_t n = r.outcomes.size();
    s += fmt::format(
        "\npower: {}/{} killed and diagnosed ({:.0f}%); {} killed, {} misnamed, {} unnamed  "
        "({:.1f} s)\n",
        correct, n, n ? 100.0 * correct / n : 100.0, r.killed(), r.misnamed(), r.unnamed(), r.seconds);
    return s;
}

nlohmann::json mutants_json(const MutantsRun& r) {
    nlohmann::json j;
    j["schema"] = "conform-mutants/1";
    j["seed"] = r.seed;
    j["cases_per_op"] = r.cases;
    j["seconds"] = r.seconds;
    const size_t n = r.outcomes.size();
    const int correct = r.diagnosed();
    j["power"] = {
        {"mutants", n},           {"killed", r.killed()},
        {"diagnosed", correct},   {"misnamed", r.misnamed()},
        {"unnamed", r.unnamed()}, {"fraction", n ? static_cast<double>(correct) / static_cast<double>(n) : 1.0}};
    auto& ms = j["mutants"] = nlohmann::json::array();
    for (const auto& m : r.outcomes) {
        nlohmann::json mj;
        mj["id"] = m.entry->name;
        mj["description"] = m.entry->description;
        std::vector<std::string> ops;
        for (Op op : m.entry->ops) ops.push_back(to_string(op));
        mj["ops"] = ops;
        mj["killed"] = m.killed();
        mj["cases_to_first_kill"] = m.cases_run;
        mj["diagnosed"] = m.correct();
        mj["misnamed"] = m.misnamed();
        auto& ks = mj["kills"] = nlohmann::json::array();
        for (const auto& k : m.kills)
            ks.push_back({{"op", to_string(k.op)},
                          {"property_case", k.index},
                          {"named", k.named},
                          {"names_mutant", m.names_me(k)},
                          {"misnamed", m.misnames(k)},
                          {"failure", to_json(k.failure)}});
        ms.push_back(mj);
    }
    return j;
}

}  // namespace conform::run
