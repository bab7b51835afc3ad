// harness/judge/judge.h — run one case on one implementation, and judge it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compare/tolerance.h"
#include "core/case.h"
#include "reference/reference.h"
#include "judge/error_map.h"

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
    // Fixtures: what the baselines are measured against — our float64
    // reference, not the file's values, so a wrong golden file cannot widen
    // its own bound (measured against it, the baselines would be as wrong as
    // it is, and everything would pass). Empty: `ref`.
    NamedD base_truth;
    std::map<std::string, DTensor> noise;  // a-priori bound per element, per output
    std::string source;     // "reference f64" or "fixture expected"
    // Non-empty when the case has a declared activation quantisation
    // (Case::act_quant) whose baseline is not finite where our float64
    // reference is: the declared format cannot hold this case's activations
    // (Q8_0's f16 block scale overflows above an amax of 127 · 65504). Such
    // a case is not run for that implementation, with this as the reason.
    std::string beyond_declared;
    // A router's case (moe, moe_route): the choice everything above was
    // computed on ([T, E] row-major, 1 at each token's chosen experts) — the
    // float64 reference's own, or (route_given) a kernel's, taken at a
    // near-tie. judge_case judges a kernel whose choice differs from the
    // reference's own on the choice it took, where route_outside_tie allows
    // it (docs/moe.md).
    std::vector<uint8_t> route_choice;
    bool route_given = false;
};

// `taken`: a router's choice to compute everything on instead of the
// reference's own (Truth::route_choice).
Truth reference_truth(const Case& c, DType dtype, const std::vector<uint8_t>* taken = nullptr);
// The measured baselines (t.base_library, t.base_sequential): the case in
// the dtype's precision in the library's and the sequential order, under
// the variant `v`, on t.route_choice where a router has one (a baseline
// makes no choice of its own).
void measure_baselines(Truth& t, const Case& c, DType dtype, const ref::Variant& v);
// The choice a router's output holds ([T, E]: 1 where nonzero); empty when
// the op has no router. `out`: the reference's outputs.
std::vector<uint8_t> route_choice_of(const Case& c, const NamedD& out);

// A router's outputs against the choice a truth was computed on
// (truth_choice, [T, E]): the choice to judge them on — truth_choice with
// each token the kernel chose otherwise replaced by the kernel's, where an
// honest program in `dtype` may make that choice under config `g`
// (route_outside_tie). A token with other than K experts keeps the truth's.
struct ChoiceTaken {
    std::vector<uint8_t> choice;
    int64_t differ = 0;    // tokens judged on the kernel's choice
    std::string outside;   // the first token whose choice no honest program makes ("": none)
    std::string took;      // the first token taken otherwise, in words
};
ChoiceTaken choice_taken(const Case& c, const BlockConfig& g, DType dtype, const NamedD& outputs,
                         const std::vector<uint8_t>& truth_choice);

// A fixture's expected values as the truth; baselines are our reference in the
// dtype, measured against the expected values.
Truth fixture_truth(const Case& c, DType dtype);

struct TensorResult {
    std::string name;
    Verdict v;
};

// A convention under which a failing output conforms (harness/diagnose/).
struct HypothesisMatch {
    std::string id;              // the bug: a mutant's id (impls/mutants/), e.g. "rope_layout_swapped"
    std::string change;          // the convention changed, e.g. "rope_layout=interleaved"
    std::string why;             // what would be wrong, in a sentence
    std::string tensor;          // where the errors below are measured
    double err_config = 0;       // max error under the config (what failed)
    double err_hypothesis = 0;   // max error under the hypothesis
    double allowed = 0;          // the bound under the hypothesis
    std::string note;            // e.g. the non-finite pattern that also matched
    ref::Variant variant;        // the reference's convention that matched (faithful for precision_downgrade)
};

// Where a failing output departs from the reference, and the error's shape
// (harness/diagnose/localise.cpp).
struct Localisation {
    std::string walked;                   // what was compared, e.g. "block taps in data-flow order"
    std::string first_divergence;         // the first of them that fails
    std::vector<std::string> conforming;  // those before it, all conforming
    std::string tensor;                   // the tensor the patterns describe
    std::string worst;                    // (token, head, dim) of the largest error
    std::vector<std::string> patterns;    // "error grows with position (r = 0.97)", ...
    bool empty() const { return walked.empty() && tensor.empty(); }
};

struct CaseResult {
    std::string impl;
    Op op = Op::rmsnorm;
    DType dtype = DType::f32;
    ActQuant act_quant = ActQuant::none;  // the activation quantisation it was judged with (declared)
    std::string case_id;
    std::string file, group;     // fixture cases
    std::string origin;          // "property" | "fixture"
    bool pass = false;
    std::string error;           // impl error (counts as a failure)
    std::vector<TensorResult> tensors;  // data-flow order; only those both sides have
    std::string first_failing;   // first tensor in data-flow order that fails
    double seconds = 0;
    // Filled by diagnosis when a case fails (later stages may add more).
    std::vector<std::string> diagnosis;      // the lines reports print
    std::vector<HypothesisMatch> hypotheses;  // every hypothesis under which the output conforms
    int hypotheses_tried = 0;                 // 0: diagnosis did not run
    Localisation localisation;
    std::string replay;          // a command line that reruns exactly this case
    std::string shapes;          // the inputs' shapes, "x[7,64] weight[1,64]"
    int shrink_steps = 0;
    int shrink_tried = 0;        // candidates judged while shrinking (0: not shrunk)
    double shrink_seconds = 0;
    std::string shrink_stopped;  // what stopped the shrink before it ran out of smaller failing cases ("": nothing)
    // Not diagnosed on its own (--diagnose first): the case of this op and
    // implementation whose diagnosis it shares, or that it is like.
    std::string same_as;
    // A router's case judged on the choice the kernel took, not the
    // reference's (a near-tie broken the other way, docs/moe.md): which
    // token took which expert for which, and the gap against its bound.
    std::string route_taken;
    // Failing cases: |impl − ref| on the first failing tensor, for the HTML
    // report; and, for a shrunk case, the same on the case it was shrunk from
    // (larger, so the bug's pattern over positions and heads shows).
    ErrorMap error_map;
    ErrorMap unshrunk_error_map;
};

// Judge outputs against the truth. Tensors compared: the truth's names that
// the outputs also have, in data-flow order.
CaseResult judge_case(const Case& c, DType dtype, const NamedD& outputs, const Truth& truth);

// Shapes of a case's inputs, for reports.
std::string input_shapes(const Case& c);

}  // namespace conform
