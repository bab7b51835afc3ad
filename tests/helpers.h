// Shared by the tests: run a case on an implementation and judge it.
#pragma once

#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "registry.h"
#include "report/report.h"
#include "judge/judge.h"

namespace conform::test {

// Bit for bit: a paged cache's poison is NaN, which == never matches.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline std::unique_ptr<Implementation> make(const std::string& name, DType dtype = DType::f32) {
    const ImplEntry* e = find_implementation(name);
    if (!e) throw std::runtime_error("no implementation " + name);
    ImplOptions o;
    o.dtype = dtype;
    return e->create(o);
}

// Judges impl on c in dtype; below f32 the inputs are first rounded to dtype
// (round_inputs), as the gate does, so impl and reference see the same values.
inline CaseResult check(Implementation& impl, const Case& c_in, DType dtype = DType::f32) {
    Case c = c_in;
    round_inputs(c, dtype);
    declared_for(c, impl);
    ImplOutputs out = run_impl(impl, c);
    if (!out.error.empty()) {
        CaseResult r;
        r.case_id = c.id;
        r.error = out.error;
        return r;
    }
    CaseResult r = judge_case(c, dtype, out.outputs, reference_truth(c, dtype));
    r.impl = impl.name();
    return r;
}

inline std::string explain(const CaseResult& r) {
    std::ostringstream o;
    print_failure(o, r);
    return o.str();
}

}  // namespace conform::test
