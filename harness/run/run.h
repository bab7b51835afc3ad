// harness/run/run.h — run one case on one implementation, and judge it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compare/tolerance.h"
#include "core/case.h"
#include "reference/reference.h"

namespace conform {

// What an implementation produced for a case. Output buffers are poisoned
// before the call (a NaN with a recognisable payload) and followed by a
// sentinel region, so unwritten elements and out-of-bounds writes are caught.
struct ImplOutputs {
    NamedD outputs;     // "out" and any taps it wrote, as float64
    std::string error;  // the implementation threw, or broke a buffer contract
    double seconds = 0;
};

ImplOutputs run_impl(Implementation& impl, const Case& c);

// The truth a case is judged against, and the baselines of the tolerance
// model in one dtype. Computed once per (case, dtype), shared by implementations.
struct Truth {
    NamedD ref;             // float64 reference, or a fixture's expected values
    NamedD base_library;    // the reference in the dtype, library order
    NamedD base_sequential; // the reference in the dtype, one accumulator
    std::string source;     // "reference f64" or "fixture expected"
};

Truth reference_truth(const Case& c, DType dtype);
// A fixture's expected values as the truth; baselines are our reference in the
// dtype, measured against the expected values.
Truth fixture_truth(const Case& c, DType dtype);

struct TensorResult {
    std::string name;
    Verdict v;
};

struct CaseResult {
    std::string impl;
    Op op = Op::rmsnorm;
    DType dtype = DType::f32;
    std::string case_id;
    std::string file, group;     // fixture cases
    std::string origin;          // "property" | "fixture"
    bool pass = false;
    std::string error;           // impl error (counts as a failure)
    std::vector<TensorResult> tensors;  // data-flow order; only those both sides have
    std::string first_failing;   // first tensor in data-flow order that fails
    double seconds = 0;
    // Filled by diagnosis when a case fails (later stages may add more).
    std::vector<std::string> diagnosis;
    std::string replay;          // a command line that reruns exactly this case
    std::string shapes;          // the inputs' shapes, "x[7,64] weight[1,64]"
    int shrink_steps = 0;
};

// Judge outputs against the truth. Tensors compared: the truth's names that
// the outputs also have, in data-flow order.
CaseResult judge_case(const Case& c, DType dtype, const NamedD& outputs, const Truth& truth);

// Shapes of a case's inputs, for reports.
std::string input_shapes(const Case& c);

}  // namespace conform
