// impls/registry.h — the explicit table of implementations.
//
// No static-initialiser registration: registry.cpp lists every implementation
// by hand, so what exists, and why something is unavailable, is readable in
// one place (ggml's supports_op switch, not a plugin lottery).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conform/bench.h"
#include "conform/impl.h"

namespace conform {

struct ImplEntry {
    std::string name;
    std::string description;
    bool mutant = false;  // deliberately wrong; never part of the default gate
    // std::function rather than plain pointers so an entry can carry state: a
    // plugin's entry (harness/plugin/) holds its loaded library.
    std::function<Availability()> available;
    std::function<std::unique_ptr<Implementation>(const ImplOptions&)> create;
    std::vector<Op> ops = {};  // mutants: the ops their bug reaches (what `conform mutants` runs them on)
    std::function<std::string()> details = {};  // more for `conform list` (simd: its compiled targets)
    // `conform bench`: the op with its inputs in the implementation's storage
    // (conform/bench.h); empty when it offers none.
    std::function<std::unique_ptr<BenchOp>(const ImplOptions&, const BenchInputs&)> bench = {};
    // Mutants: the bug id the diagnosis must name, where it is not the
    // mutant's own name (a bug named by its effect: precision_downgrade).
    std::string named_by = {};
    // Run only when --impl names it (an implementation that exists to show
    // a declaration, e.g. scalar-q8_0), never by default.
    bool by_name = false;
    // Its bench op runs on a GPU: `conform bench` prices it against the
    // device's ceilings (measured through LibTorch there), not the host's.
    bool on_device = false;
    const std::string& bug_id() const { return named_by.empty() ? name : named_by; }
};

// Every in-repo implementation that is part of the gate (scalar, simd, cuda…).
const std::vector<ImplEntry>& implementations();

// The mutants: the scalar implementation with exactly one bug each.
const std::vector<ImplEntry>& mutant_implementations();

// Looks a name up in both tables; nullptr when unknown.
const ImplEntry* find_implementation(const std::string& name);

}  // namespace conform
