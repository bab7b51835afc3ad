// impls/simd/target.h — which compiled Highway target runs the kernels.
//
// Every kernel is compiled once per target (foreach_target) and called
// through its HWY_EXPORT table. An instance that was not asked for a target
// follows HWY_DYNAMIC_DISPATCH (the best this CPU supports); one that was
// (--simd-target) calls that target's entry of the same table, so two
// instances with different targets can live in one process (the tests run
// every target side by side) without touching Highway's global choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conform::simd {

struct Target {
    int64_t bit = 0;      // one HWY_* target bit
    bool forced = false;  // false: whatever HWY_DYNAMIC_DISPATCH chooses (== bit)
};

struct TargetInfo {
    std::string name;  // lower case: "avx3", "avx2", "sse4", "scalar"
    int64_t bit = 0;
    bool supported = false;  // this CPU can run it
    bool best = false;       // what dynamic dispatch picks here
};

// Every compiled target, best first.
std::vector<TargetInfo> compiled_targets();

// The target dynamic dispatch uses on this CPU.
Target best_target();

// "" or a lower-case name from compiled_targets(); "avx512" is accepted for
// "avx3". Throws ImplError naming the compiled targets when unknown, or
// saying the CPU lacks it when it is compiled but unsupported.
Target resolve_target(const std::string& name);

std::string target_name(int64_t bit);

// One line per compiled target, for `conform list`.
std::string describe_targets();

}  // namespace conform::simd
