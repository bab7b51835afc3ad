// target — the compiled Highway targets and the choice among them. Built with
// the same HWY_TARGETS as the kernels (impls/CMakeLists.txt), so "compiled"
// here means compiled there.
#include "simd/target.h"

#include <algorithm>
#include <cctype>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "conform/impl.h"

namespace conform::simd {

std::string target_name(int64_t bit) {
    std::string n = hwy::TargetName(bit);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return n;
}

std::vector<TargetInfo> compiled_targets() {
    const int64_t supported = hwy::SupportedTargets();
    const int64_t usable = supported & HWY_TARGETS;
    const int64_t best = usable & -usable;  // lowest bit = best target
    std::vector<TargetInfo> out;
    for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
        const int64_t bit = bits & -bits;
        out.push_back({target_name(bit), bit, (supported & bit) != 0, bit == best});
    }
    return out;
}

Target best_target() {
    for (const auto& t : compiled_targets())
        if (t.best) return {t.bit, false};
    return {HWY_STATIC_TARGET, false};
}

Target resolve_target(const std::string& name_in) {
    if (name_in.empty()) return best_target();
    std::string name = name_in;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (name == "avx512") name = "avx3";
    std::string names;
    for (const auto& t : compiled_targets()) {
        names += (names.empty() ? "" : ", ") + t.name;
        if (t.name != name) continue;
        if (!t.supported) throw ImplError("simd target '" + name_in + "' is compiled but this CPU cannot run it");
        return {t.bit, true};
    }
    throw ImplError("unknown simd target '" + name_in + "' (compiled: " + names + ")");
}

std::string describe_targets() {
    std::string s;
    for (const auto& t : compiled_targets()) {
        s += t.name;
        s += t.best ? " (best here)" : t.supported ? "" : " (not on this CPU)";
        s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return "targets: " + s;
}

}  // namespace conform::simd
