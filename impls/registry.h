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

#include "conform/impl.h"

namespace conform {

struct ImplOptions {
    DType dtype = DType::f32;
    std::string simd_target;  // simd only: force one compiled Highway target ("" = best)
    int threads = 0;          // 0 = implementation's default
};

struct Availability {
    bool available = true;
    std::string reason;  // why not, when !available
};

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
};

// Every in-repo implementation that is part of the gate (scalar, simd, cuda…).
const std::vector<ImplEntry>& implementations();

// The mutants: the scalar implementation with exactly one bug each.
const std::vector<ImplEntry>& mutant_implementations();

// Looks a name up in both tables; nullptr when unknown.
const ImplEntry* find_implementation(const std::string& name);

}  // namespace conform
