// conform mutants: flags → run::run_mutants (harness/run/mutants.h) → each
// first kill's failure report, the table, mutants.json. Exit 0 only when
// every mutant is killed and named.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "registry.h"
#include "report/report.h"
#include "run/mutants.h"

namespace conform::cli {

namespace {

struct Options {
    int cases = 100;  // property cases per op, at most, before a mutant counts as surviving
    std::string seed = std::to_string(kDefaultSeed);
    std::string out = "reports";
    std::string only;  // comma-separated mutant ids; empty = all
    bool quiet = false;
};

int run(const Options& o) {
    uint64_t seed = 0;
    try {
        seed = parse_seed(o.seed);
    } catch (const InputError& e) {
        std::cerr << "conform mutants: " << e.what() << "\n";
        return kUsage;
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

    const run::MutantsRun r = run::run_mutants(selected, o.cases, seed, std::cerr);
    if (!o.quiet)
        for (const auto& m : r.outcomes)
            if (m.killed()) print_failure(std::cout, m.kills.front().failure);
    std::cout << run::mutants_table(r);
    const std::string path = o.out + "/mutants.json";
    try {
        write_file_atomic(path, run::mutants_json(r).dump(2) + "\n");
    } catch (const std::exception& ex) {
        std::cerr << "conform mutants: cannot write report: " << ex.what() << "\n";
        return kUsage;
    }
    if (!o.quiet) std::cout << "report: " << path << "\n";
    return r.diagnosed() == static_cast<int>(r.outcomes.size()) ? kConform : kNonconformance;
}

}  // namespace

Command add_mutants(CLI::App& app) {
    auto o = std::make_shared<Options>();
    CLI::App* sub = app.add_subcommand(
        "mutants", "the harness's power: every mutant must be killed and named by the diagnosis (exit 0 only then)");
    sub->add_option("--cases", o->cases, "property cases per op before a mutant counts as surviving (default 100)")
        ->check(positive());
    sub->add_option("--seed", o->seed, "seed for property cases, or 'random' (default 20261129)")->check(seed_text());
    sub->add_option("--out", o->out, "directory for mutants.json (default reports/)");
    sub->add_option("--mutant", o->only, "only these mutants, comma-separated");
    sub->add_flag("--quiet", o->quiet, "only the table and the power line");
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli
