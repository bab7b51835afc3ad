// conform mutants: the harness's own power. Every mutant (impls/mutants/: the
// scalar implementation with exactly one bug) is run on the ops its bug
// reaches, with the normal generators, until a case fails (killed); that
// case is shrunk and diagnosed like any gate failure, and the diagnosis must
// name the mutant's id (diagnosed). Exit 0 only when every mutant is both.
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "registry.h"
#include "report/report.h"
#include "run/runner.h"

namespace conform::cli {

namespace {

struct Options {
    int cases = 100;  // property cases per op, at most, before a mutant counts as surviving
    std::string seed = std::to_string(kDefaultSeed);
    std::string out = "reports";
    std::string only;  // comma-separated mutant ids; empty = all
    bool quiet = false;
};

// The first failing case of one op, shrunk and explained.
struct Kill {
    Op op;
    int index = 0;  // property case number
    CaseResult failure;
    std::vector<std::string> named;  // bug ids the diagnosis names
};

struct Outcome {
    const ImplEntry* entry = nullptr;
    int cases_run = 0;        // cases run up to and including the first kill (or all, if none)
    std::vector<Kill> kills;  // per op the bug reached, in the order they fell; kills[0] is the first
    bool killed() const { return !kills.empty(); }
    bool names_me(const Kill& k) const {
        return std::find(k.named.begin(), k.named.end(), entry->bug_id()) != k.named.end();
    }
    // A kill that names a bug, but not this one: a confident wrong name, worse
    // than none (the engineer goes looking for the wrong thing).
    bool misnames(const Kill& k) const { return !k.named.empty() && !names_me(k); }
    bool misnamed() const {
        return std::any_of(kills.begin(), kills.end(), [&](const Kill& k) { return misnames(k); });
    }
    // Killed, named wrongly nowhere, but left unnamed somewhere.
    bool unnamed() const {
        return killed() && !misnamed() &&
               std::any_of(kills.begin(), kills.end(), [](const Kill& k) { return k.named.empty(); });
    }
    // Diagnosed: the first kill names the mutant — and so does the first kill
    // on every other op, so that whichever op a user meets the bug through,
    // the report names it.
    bool correct() const {
        if (!killed()) return false;
        for (const auto& k : kills)
            if (!names_me(k)) return false;
        return true;
    }
};

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

int run(const Options& o) {
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t seed = 0;
    if (o.seed == "random") {
        seed = std::random_device{}() & 0xFFFFFFFFu;
    } else {
        try {
            size_t used = 0;
            seed = std::stoull(o.seed, &used);
            if (used != o.seed.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            std::cerr << "conform mutants: --seed: expected a number or 'random', found '" << o.seed << "'\n";
            return kUsage;
        }
    }
    std::vector<const ImplEntry*> selected;
    const auto wanted = split_list(o.only);
    const auto& table = mutant_implementations();
    for (const auto& name : wanted)
        if (std::none_of(table.begin(), table.end(), [&](const ImplEntry& e) { return e.name == name; })) {
            std::cerr << "conform mutants: --mutant: unknown mutant '" << name << "' (see `conform list`)\n";
            return kUsage;
        }
    for (const auto& e : table)
        if (wanted.empty() || std::find(wanted.begin(), wanted.end(), e.name) != wanted.end()) selected.push_back(&e);
    if (!o.quiet)
        std::cout << fmt::format("conform mutants: {} mutants, up to {} property cases per op, seed {}\n",
                                 selected.size(), o.cases, seed);

    std::map<std::pair<Op, int>, Drawn> drawn;
    auto draw = [&](Op op, int i) -> Drawn& {
        auto it = drawn.find({op, i});
        if (it != drawn.end()) return it->second;
        Drawn d{run::property_case(gen::draw(op, seed, i), DType::f32), nullptr};
        return drawn.emplace(std::make_pair(op, i), std::move(d)).first->second;
    };

    std::vector<Outcome> outcomes;
    for (const ImplEntry* e : selected) {
        Outcome m;
        m.entry = e;
        // A mutant that cannot run here is not killed: it counts against the power.
        std::unique_ptr<Implementation> impl;
        try {
            const Availability a = e->available();
            if (!a.available) throw ImplError(a.reason);
            impl = e->create(ImplOptions{});
        } catch (const std::exception& ex) {
            std::cerr << "conform mutants: " << e->name << " cannot run: " << ex.what() << "\n";
            outcomes.push_back(std::move(m));
            continue;
        }
        // Case i of every op the bug reaches, then case i + 1: the first kill is
        // the first failure a user running those ops would meet. Each op stops
        // at its own first kill; an op the bug never shows in runs all cases.
        std::vector<Op> alive = e->ops;
        for (int i = 0; i < o.cases && !alive.empty(); ++i) {
            for (Op op : std::vector<Op>(alive)) {
                Drawn& d = draw(op, i);
                if (!impl->supports(op, d.c.config).ok) continue;
                if (!m.killed()) ++m.cases_run;
                if (!d.truth) d.truth = std::make_unique<Truth>(reference_truth(d.c, DType::f32));
                const run::Judged j = run::run_and_judge(*impl, e->name, d.c, DType::f32, *d.truth);
                if (j.result.pass) continue;
                Kill k{op, i, diagnose::shrink_and_explain(*impl, gen::Stream{op, seed, std::nullopt, {}, 0}, i, DType::f32,
                                                           {&d.c, &j.out.outputs, d.truth.get()}, j.result), {}};
                k.failure.replay = "build/conform --impl " + e->name + " --case '" + k.failure.case_id + "'";
                for (const auto& h : k.failure.hypotheses)
                    if (std::find(k.named.begin(), k.named.end(), h.id) == k.named.end()) k.named.push_back(h.id);
                m.kills.push_back(std::move(k));
                alive.erase(std::find(alive.begin(), alive.end(), op));
            }
        }
        outcomes.push_back(std::move(m));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- report ------------------------------------------------------------------
    int killed = 0, correct = 0, misnamed = 0, unnamed = 0;
    for (const auto& m : outcomes)
        killed += m.killed(), correct += m.correct(), misnamed += m.misnamed(), unnamed += m.unnamed();
    if (!o.quiet)
        for (const auto& m : outcomes)
            if (m.killed()) print_failure(std::cout, m.kills.front().failure);
    std::cout << fmt::format("\n{:<28} {:<7} {:>6}  {:<30} {:<8} {}\n", "mutant", "killed", "cases", "diagnosis",
                             "correct", "ops killed (and named)");
    for (const auto& m : outcomes) {
        std::string named = "-", verdict = "NO", ops;
        if (m.killed()) {
            const Kill& first = m.kills.front();
            named = first.named.empty() ? "none" : join(first.named);
            if (m.correct()) verdict = first.named.size() == 1 ? "yes" : "yes*";
        }
        for (Op op : m.entry->ops) {
            auto k = std::find_if(m.kills.begin(), m.kills.end(), [&](const Kill& x) { return x.op == op; });
            ops += std::string(ops.empty() ? "" : " ") + to_string(op) +
                   (k == m.kills.end() ? "(-)" : m.names_me(*k) ? "" : "(misnamed: " + join(k->named) + ")");
        }
        std::cout << fmt::format("{:<28} {:<7} {:>6}  {:<30} {:<8} {}\n", m.entry->name, m.killed() ? "yes" : "NO",
                                 m.killed() ? std::to_string(m.cases_run) : fmt::format(">{}", m.cases_run), named,
                                 verdict, ops);
    }
    std::cout << "(cases: property cases run until the first kill; ops: (-) never failed there, the bug does not "
                 "show through that op's cases; yes*: named among coinciding hypotheses)\n";
    const size_t n = outcomes.size();
    std::cout << fmt::format("\npower: {}/{} killed and diagnosed ({:.0f}%); {} killed, {} misnamed, {} unnamed  "
                             "({:.1f} s)\n",
                             correct, n, n ? 100.0 * correct / n : 100.0, killed, misnamed, unnamed, seconds);

    nlohmann::json j;
    j["schema"] = "conform-mutants/1";
    j["seed"] = seed;
    j["cases_per_op"] = o.cases;
    j["seconds"] = seconds;
    j["power"] = {{"mutants", n}, {"killed", killed}, {"diagnosed", correct}, {"misnamed", misnamed},
                  {"unnamed", unnamed},
                  {"fraction", n ? static_cast<double>(correct) / static_cast<double>(n) : 1.0}};
    auto& ms = j["mutants"] = nlohmann::json::array();
    for (const auto& m : outcomes) {
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
    const std::string path = o.out + "/mutants.json";
    try {
        write_file_atomic(path, j.dump(2) + "\n");
    } catch (const std::exception& ex) {
        std::cerr << "conform mutants: cannot write report: " << ex.what() << "\n";
        return kUsage;
    }
    if (!o.quiet) std::cout << "report: " << path << "\n";
    return correct == static_cast<int>(n) ? kConform : kNonconformance;
}

}  // namespace

Command add_mutants(CLI::App& app) {
    auto o = std::make_shared<Options>();
    CLI::App* sub = app.add_subcommand(
        "mutants", "the harness's power: every mutant must be killed and named by the diagnosis (exit 0 only then)");
    sub->add_option("--cases", o->cases, "property cases per op before a mutant counts as surviving (default 100)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--seed", o->seed, "seed for property cases, or 'random' (default 20261129)");
    sub->add_option("--out", o->out, "directory for mutants.json (default reports/)");
    sub->add_option("--mutant", o->only, "only these mutants, comma-separated");
    sub->add_flag("--quiet", o->quiet, "only the table and the power line");
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli
