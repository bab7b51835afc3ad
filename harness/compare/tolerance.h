// harness/compare/tolerance.h — when is an implementation's tensor right?
//
// The model (one table, in tolerance.cpp), per element i:
//
//   err_i     = |impl_i - ref64_i|
//   baseline  = max over legitimate programs in the implementation's dtype of
//               max |baseline - ref64|, where the legitimate programs are the
//               reference itself in that dtype in two summation orders: the
//               library's (blocked, many partial sums) and one accumulator in
//               index order (a plain loop). Any order in between — SIMD lanes,
//               tiles, split-K over threads — has errors of the same size.
//               One number per tensor: a sampled error, not a per-element law.
//   floor_i   = 2 * u * (|ref64_i| + 0.3)   (dtype rounding noise at the
//               element's magnitude: what FlashAttention-3's
//               2 * |fl(fl(ref + 0.3) - 0.3) - ref| can reach there)
//   noise_i   = the a-priori bound of element i (harness/reference/noise.cpp):
//               its own reductions' noise in float32 arithmetic in any order,
//               sqrt(K) * u * (|a| @ |b|)_i (Higham's typical bound), a
//               rounding to the dtype wherever a value may be stored, and its
//               inputs' bounds carried through each stage of the block.
//   allowed_i = k * baseline + max(floor_i, noise_i)           (k per op, default 2)
//   and a backstop on the whole tensor:
//   nmse     <= max(nmse_max[op][dtype], k^2 * nmse(baseline), sum noise_i^2 / sum ref_i^2)
//               (ggml-style; the last term: an error at the a-priori bound
//               everywhere is rounding, even where the output cancels)
//
// Pass iff every value is finite, err_i <= allowed_i for every i and nmse
// within its bound. Every report shows the element with the largest
// err_i / allowed_i — where, its error, each term there, which one decided —
// and the margin min_i allowed_i / err_i.
#pragma once

#include <string>
#include <vector>

#include "compare/metrics.h"
#include "conform/config.h"
#include "conform/dtype.h"
#include "conform/op_info.h"
#include "conform/ops.h"

namespace conform {

// The op's row of the table: k (the multiple of the baseline error) and the
// NMSE backstops per dtype, in its OpInfo record (conform/op_info.h).
// k: FlashAttention's multiple of the low-precision baseline's error. The
// NMSE backstops are coarse bounds no honest program comes near (an honest
// f32 tensor has NMSE ~1e-13); they decide only when the max error is
// lenient, e.g. where the baseline itself is poor (RoPE at very large positions).
const ToleranceRow& tolerance_row(Op op);

struct Baseline {
    double err_library = 0;     // max |ref_dtype(library order) - ref64|
    double err_sequential = 0;  // max |ref_dtype(sequential order) - ref64|
    double nmse = 0;            // the larger of the two baselines' NMSE
    // Per row (token), the larger of the two orders' max error in that row:
    // what the baseline allows there. Empty: the tensor-wide maximum everywhere.
    std::vector<double> row;
};

struct Verdict {
    Metrics m;
    Baseline base;
    double k = 2;
    // The decisive element: the largest err_i / allowed_i (when nothing
    // differs, the largest |ref|). The terms below are its own.
    Location at;
    double err = 0;          // err_i there
    double baseline = 0;     // the baseline of its row
    double floor = 0;        // floor_i there
    double noise = 0;        // noise_i there
    double allowed = 0;      // allowed_i there
    double noise_max = 0;    // max_i noise_i over the tensor
    double nmse_allowed = 0;
    int64_t mismatches = 0;  // elements over their allowed_i (or non-finite)
    double mismatch_pct = 0;
    double margin = 0;       // min_i allowed_i / err_i (> 1 passes; inf when err == 0)
    bool pass = false;
    std::string decided_by;  // "baseline", "floor", "a-priori", "nmse", "nonfinite"
    std::string why;         // one line when failing
};

// The rounding floor of `dtype` at ref's magnitude: at element i, and the
// largest over the tensor.
double rounding_floor(double ref_i, DType dtype);
double rounding_floor(const DTensor& ref, DType dtype);

// Judge one tensor. `a` is the output under test (ref.numel() values), `m`
// its metrics against ref (head_dim as measured, for locations); `noise` the
// a-priori bound per element (ref's shape), or null where none applies.
Verdict judge(Op op, DType dtype, const double* a, const Metrics& m, const Baseline& base, const DTensor& ref,
              const DTensor* noise, int64_t head_dim = 0);

}  // namespace conform
