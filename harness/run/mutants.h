// harness/run/mutants.h — conform mutants: the harness's own power. Every
// mutant (impls/mutants/: the scalar implementation with exactly one bug) is
// run on the ops its bug reaches, with the normal generators, until a case
// fails (killed); that case is shrunk and diagnosed like any gate failure,
// and the diagnosis must name the mutant's id (diagnosed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "registry.h"
#include "run/runner.h"

namespace conform::run {

// The first failing case of one op, shrunk and explained.
struct Kill {
    Op op;
    int index = 0;  // property case number
    CaseResult failure;
    std::vector<std::string> named;  // bug ids the diagnosis names
};

struct MutantOutcome {
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

struct MutantsRun {
    uint64_t seed = 0;
    int cases = 0;  // property cases per op, at most, before a mutant counts as surviving
    double seconds = 0;
    std::vector<MutantOutcome> outcomes;
    int killed() const;
    int diagnosed() const;  // killed, and named on every op it was killed on
    int misnamed() const;
    int unnamed() const;
};

// Runs each mutant until it is killed on every op it reaches or `cases` run
// out; a mutant that cannot run here is said on `err` and counts as surviving.
MutantsRun run_mutants(const std::vector<const ImplEntry*>& mutants, int cases, uint64_t seed, std::ostream& err);

// The table (mutant, killed, cases, diagnosis, correct, ops) and the power line.
std::string mutants_table(const MutantsRun& r);
// conform-mutants/1.
nlohmann::json mutants_json(const MutantsRun& r);

}  // namespace conform::run
