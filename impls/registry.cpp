// impls/registry.cpp — every implementation, listed by hand.
#include "registry.h"

#include "scalar/scalar.h"

namespace conform {
namespace {

Availability always() { return {}; }

}  // namespace

const std::vector<ImplEntry>& implementations() {
    static const std::vector<ImplEntry> table = {
        {"scalar", "plain float32 loops, llama2.c style", false, always, scalar::make_scalar},
    };
    return table;
}

const std::vector<ImplEntry>& mutant_implementations() {
    // The mutants table lives in impls/mutants/ and will be listed here.
    static const std::vector<ImplEntry> table = {};
    return table;
}

const ImplEntry* find_implementation(const std::string& name) {
    for (const auto* table : {&implementations(), &mutant_implementations()})
        for (const ImplEntry& e : *table)
            if (e.name == name) return &e;
    return nullptr;
}

}  // namespace conform
