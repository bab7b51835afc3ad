// harness/compare/tolerance.h — when is an implementation's tensor right?
//
// The model (one table, in tolerance.cpp):
//
//   err      = max |impl - ref64|
//   baseline = max over legitimate programs in the implementation's dtype of
//              max |baseline - ref64|, where the legitimate programs are the
//              reference itself in that dtype in two summation orders: the
//              library's (blocked, many partial sums) and one accumulator in
//              index order (a plain loop). Any order in between — SIMD lanes,
//              tiles, split-K over threads — has errors of the same size.
//   floor    = 2 * max |fl(fl(ref64 + 0.3) - 0.3) - ref64|   (dtype rounding
//              noise at the output's magnitude, FlashAttention-3)
//   noise    = the a-priori rounding noise of the output's last reduction,
//              sqrt(K) * u * max(|a| @ |b|) (Higham's typical bound, any
//              order; computed by the reference in float64). Two sampled
//              orders can underestimate what a third legitimate order does
//              on a small tensor; this term cannot.
//   allowed  = k * baseline + max(floor, noise)               (k per op, default 2)
//   and a backstop on the whole tensor:
//   nmse    <= max(nmse_max[op][dtype], k^2 * nmse(baseline))   (ggml-style)
//
// Pass iff every value is finite, err <= allowed and nmse within its bound.
// Every report shows err, each term, which one decided, and the margin.
#pragma once

#include <string>

#include "compare/metrics.h"
#include "conform/config.h"
#include "conform/ops.h"

namespace conform {

struct ToleranceRow {
    Op op;
    double k;         // multiple of the baseline error
    double nmse_f32;  // backstop NMSE bounds per dtype
    double nmse_bf16;
    double nmse_f16;
};

const ToleranceRow& tolerance_row(Op op);

struct Baseline {
    double err_library = 0;     // max |ref_dtype(library order) - ref64|
    double err_sequential = 0;  // max |ref_dtype(sequential order) - ref64|
    double nmse = 0;            // the larger of the two baselines' NMSE
};

struct Verdict {
    Metrics m;
    Baseline base;
    double k = 2;
    double floor = 0;
    double noise = 0;
    double allowed = 0;
    double nmse_allowed = 0;
    int64_t mismatches = 0;  // elements over `allowed`
    double mismatch_pct = 0;
    double margin = 0;       // allowed / err (> 1 passes; inf when err == 0)
    bool pass = false;
    std::string decided_by;  // "baseline", "floor", "a-priori", "nmse", "nonfinite"
    std::string why;         // one line when failing
};

// The rounding floor of `dtype` at the magnitudes of ref.
double rounding_floor(const DTensor& ref, DType dtype);

// Judge one tensor. `a` is the output under test.
// `noise` is the a-priori term (0 when none applies).
Verdict judge(Op op, DType dtype, const Metrics& m, const Baseline& base, const DTensor& ref, int64_t mismatches,
              double noise = 0.0);

// Rounds a double to the nearest value of dtype (round to nearest even).
double round_to(double x, DType dtype);

}  // namespace conform
