#include "compare/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace conform {

const ToleranceRow& tolerance_row(Op op) { return op_info(op).tolerance; }

// FlashAttention-3 measures 2 |fl(fl(r + 0.3) - 0.3) - r| over a tensor; per
// element that sample can be 0 by luck (r + 0.3 rounding back exactly), so
// each element gets what the expression can reach: two roundings at |r| + 0.3.
double rounding_floor(double r, DType dtype) {
    return 2.0 * unit_roundoff(dtype) * (std::abs(r) + 0.3);
}

double rounding_floor(const DTensor& ref, DType dtype) {
    double m = 0;
    for (double r : ref.data) m = std::max(m, rounding_floor(r, dtype));
    return m;
}

Verdict judge(Op op, DType dtype, const double* a, const Metrics& m, const Baseline& base, const DTensor& ref,
              const DTensor* noise, int64_t head_dim) {
    const ToleranceRow& row = tolerance_row(op);
    Verdict v;
    v.m = m;
    v.base = base;
    v.k = row.k;
    const double worst_base = std::max(base.err_library, base.err_sequential);
    const int64_t n = ref.numel(), cols = std::max<int64_t>(1, ref.cols());
    // The baseline of element i's row: a large-position row's angle error,
    // or an outlier row's, must not loosen the other rows.
    auto base_at = [&](int64_t i) {
        const size_t r = static_cast<size_t>(i / cols);
        return r < base.row.size() ? base.row[r] : worst_base;
    };
    if (noise && noise->numel() != n) throw std::logic_error("a-priori noise has another shape than its output");

    // Per element: allowed_i, and the element with the largest err_i / allowed_i.
    int64_t at = -1, largest_ref = -1;
    double worst_ratio = -1, noise_sq = 0, ref_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double r = ref.data[i], nz = noise ? noise->data[i] : 0.0;
        const double allowed = row.k * base_at(i) + std::max(rounding_floor(r, dtype), nz);
        const double d = std::abs(a[i] - r);
        v.noise_max = std::max(v.noise_max, nz);
        noise_sq += nz * nz;
        ref_sq += r * r;
        if (largest_ref < 0 || std::abs(r) > std::abs(ref.data[largest_ref])) largest_ref = i;
        if (!(d <= allowed)) ++v.mismatches;  // NaN and Inf count
        const double ratio = std::isfinite(d) ? (allowed > 0 ? d / allowed : (d > 0 ? INFINITY : 0.0)) : -1;
        if (ratio > worst_ratio && ratio > 0) {
            worst_ratio = ratio;
            at = i;
        }
    }
    if (at < 0) at = largest_ref;
    if (at >= 0) {
        v.at = locate(at, ref.cols(), head_dim);
        v.err = std::abs(a[at] - ref.data[at]);
        v.floor = rounding_floor(ref.data[at], dtype);
        v.noise = noise ? noise->data[at] : 0.0;
        v.baseline = base_at(at);
        v.allowed = row.k * v.baseline + std::max(v.floor, v.noise);
    }
    v.mismatch_pct = n ? 100.0 * static_cast<double>(v.mismatches) / static_cast<double>(n) : 0;
    const double table_nmse = dtype == DType::f32 ? row.nmse_f32 : dtype == DType::bf16 ? row.nmse_bf16 : row.nmse_f16;
    const double noise_nmse = ref_sq > 0 ? noise_sq / ref_sq : 0.0;
    v.nmse_allowed = std::max({table_nmse, row.k * row.k * base.nmse, noise_nmse});
    v.margin = v.err > 0 ? v.allowed / v.err : std::numeric_limits<double>::infinity();
    const double small = std::max(v.floor, v.noise);
    v.decided_by = row.k * v.baseline >= small ? "baseline" : (v.noise > v.floor ? "a-priori" : "floor");

    std::ostringstream why;
    if (m.nonfinite) {
        v.pass = false;
        v.decided_by = "nonfinite";
        v.margin = 0;
        v.at = m.first_nonfinite;
        v.err = INFINITY;
        why << "non-finite value " << m.nonfinite_value << " at " << m.first_nonfinite.str();
    } else if (v.mismatches > 0) {
        v.pass = false;
        why << "error " << v.err << " > allowed " << v.allowed << " at " << v.at.str() << " (got " << a[at]
            << ", want " << ref.data[at] << ")";
        if (v.mismatches > 1) why << "; " << v.mismatches << " elements over their bound";
    } else if (!(m.nmse <= v.nmse_allowed)) {
        v.pass = false;
        v.decided_by = "nmse";
        why << "nmse " << m.nmse << " > allowed " << v.nmse_allowed;
    } else {
        v.pass = true;
    }
    v.why = why.str();
    return v;
}

}  // namespace conform
