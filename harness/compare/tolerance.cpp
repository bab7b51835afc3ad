#include "compare/tolerance.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace conform {

// ---- the table ---------------------------------------------------------------
// k: FlashAttention's multiple of the low-precision baseline's error.
// NMSE backstops: a coarse bound no honest program comes near (an honest f32
// tensor has NMSE ~1e-13); they decide only when max error is lenient, e.g.
// where the baseline itself is poor (RoPE at very large positions).
static const ToleranceRow kTable[] = {
    //  op             k    nmse f32  nmse bf16  nmse f16
    {Op::rmsnorm,   2.0, 1e-9, 1e-4, 1e-5},
    {Op::rope,      2.0, 1e-9, 1e-4, 1e-5},
    {Op::qk_norm,   2.0, 1e-9, 1e-4, 1e-5},
    {Op::attention, 2.0, 1e-8, 5e-4, 5e-5},
    {Op::swiglu,    2.0, 1e-8, 5e-4, 5e-5},
    {Op::block,     2.0, 1e-8, 1e-3, 1e-4},
    {Op::decode,    2.0, 1e-8, 1e-3, 1e-4},
};

const ToleranceRow& tolerance_row(Op op) {
    for (const auto& r : kTable)
        if (r.op == op) return r;
    throw std::logic_error("no tolerance row for op");
}

double round_to(double x, DType dtype) {
    if (!std::isfinite(x)) return x;
    switch (dtype) {
        case DType::f32: return static_cast<double>(static_cast<float>(x));
        case DType::bf16: {
            float f = static_cast<float>(x);
            uint32_t u;
            std::memcpy(&u, &f, 4);
            u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even on the 16 dropped bits
            u &= 0xFFFF0000u;
            std::memcpy(&f, &u, 4);
            return f;
        }
        case DType::f16: {
            // 11 significant bits, normal exponent >= -14, subnormal step 2^-24.
            if (x == 0) return 0;
            int e;
            std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
            const int exp = std::max(e - 1, -14);
            const double step = std::ldexp(1.0, exp - 10);
            double r = std::nearbyint(x / step) * step;
            return std::abs(r) > 65504.0 ? std::copysign(INFINITY, x) : r;
        }
    }
    return x;
}

double rounding_floor(const DTensor& ref, DType dtype) {
    double m = 0;
    for (double r : ref.data) {
        const double t = round_to(round_to(r + 0.3, dtype) - 0.3, dtype);
        m = std::max(m, std::abs(t - r));
    }
    return 2.0 * m;
}

Verdict judge(Op op, DType dtype, const Metrics& m, const Baseline& base, const DTensor& ref, int64_t mismatches,
              double noise) {
    const ToleranceRow& row = tolerance_row(op);
    Verdict v;
    v.m = m;
    v.base = base;
    v.k = row.k;
    v.floor = rounding_floor(ref, dtype);
    const double worst_base = std::max(base.err_library, base.err_sequential);
    v.noise = noise;
    v.allowed = row.k * worst_base + std::max(v.floor, v.noise);
    const double table_nmse = dtype == DType::f32 ? row.nmse_f32 : dtype == DType::bf16 ? row.nmse_bf16 : row.nmse_f16;
    v.nmse_allowed = std::max(table_nmse, row.k * row.k * base.nmse);
    v.mismatches = mismatches;
    v.mismatch_pct = m.numel ? 100.0 * static_cast<double>(mismatches) / static_cast<double>(m.numel) : 0;
    v.margin = m.max_abs > 0 ? v.allowed / m.max_abs : std::numeric_limits<double>::infinity();
    const double small = std::max(v.floor, v.noise);
    v.decided_by = row.k * worst_base >= small ? "baseline" : (v.noise > v.floor ? "a-priori" : "floor");

    std::ostringstream why;
    if (m.nonfinite) {
        v.pass = false;
        v.decided_by = "nonfinite";
        v.margin = 0;
        why << "non-finite value " << m.nonfinite_value << " at " << m.first_nonfinite.str();
    } else if (!(m.max_abs <= v.allowed)) {
        v.pass = false;
        why << "max error " << m.max_abs << " > allowed " << v.allowed << " at " << m.worst.str() << " (got "
            << m.worst_actual << ", want " << m.worst_expected << ")";
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
