#include "compare/metrics.h"

#include <cmath>
#include <sstream>

namespace conform {

std::string Location::str() const {
    std::ostringstream o;
    if (head >= 0)
        o << "(token " << token << ", head " << head << ", dim " << dim << ")";
    else
        o << "(token " << token << ", col " << col << ")";
    return o.str();
}

Location locate(int64_t flat, int64_t cols, int64_t head_dim) {
    Location l;
    l.flat = flat;
    if (flat < 0 || cols <= 0) return l;
    l.token = flat / cols;
    l.col = flat % cols;
    if (head_dim > 0) {
        l.head = l.col / head_dim;
        l.dim = l.col % head_dim;
    }
    return l;
}

namespace {

template <typename T>
Metrics measure_impl(const T* a, const DTensor& b, int64_t head_dim) {
    Metrics m;
    m.numel = b.numel();
    const int64_t cols = b.cols();
    for (int64_t i = 0; i < m.numel; ++i) m.max_ref = std::max(m.max_ref, std::abs(b.data[i]));
    m.rel_floor = std::max(1e-3 * m.max_ref, 1e-30);
    double se = 0, sb = 0, sa = 0, ab = 0;
    int64_t worst = -1;
    for (int64_t i = 0; i < m.numel; ++i) {
        const double x = static_cast<double>(a[i]), y = b.data[i];
        if (!std::isfinite(x)) {
            if (!m.nonfinite) {
                m.nonfinite = true;
                m.first_nonfinite = locate(i, cols, head_dim);
                m.nonfinite_value = x;
            }
            continue;
        }
        const double d = std::abs(x - y);
        if (worst < 0 || d > m.max_abs) {
            m.max_abs = d;
            worst = i;
        }
        m.max_rel = std::max(m.max_rel, d / std::max(std::abs(y), m.rel_floor));
        se += (x - y) * (x - y);
        sb += y * y;
        sa += x * x;
        ab += x * y;
    }
    m.nmse = sb > 0 ? se / sb : (se > 0 ? INFINITY : 0.0);
    m.cosine = (sa > 0 && sb > 0) ? ab / std::sqrt(sa * sb) : (sa == sb ? 1.0 : 0.0);
    if (worst >= 0) {
        m.worst = locate(worst, cols, head_dim);
        m.worst_actual = static_cast<double>(a[worst]);
        m.worst_expected = b.data[worst];
    }
    if (m.nonfinite) {
        m.max_abs = INFINITY;
        m.nmse = INFINITY;
        m.worst = m.first_nonfinite;
        m.worst_actual = m.nonfinite_value;
        m.worst_expected = b.data[m.first_nonfinite.flat];
    }
    return m;
}

template <typename T>
int64_t count_over_impl(const T* a, const DTensor& b, double allowed) {
    int64_t n = 0;
    for (int64_t i = 0; i < b.numel(); ++i) {
        const double d = std::abs(static_cast<double>(a[i]) - b.data[i]);
        if (!(d <= allowed)) ++n;  // NaN counts as a mismatch
    }
    return n;
}

}  // namespace

Metrics measure(const float* a, const DTensor& b, int64_t head_dim) { return measure_impl(a, b, head_dim); }
Metrics measure(const double* a, const DTensor& b, int64_t head_dim) { return measure_impl(a, b, head_dim); }
int64_t count_over(const float* a, const DTensor& b, double allowed) { return count_over_impl(a, b, allowed); }
int64_t count_over(const double* a, const DTensor& b, double allowed) { return count_over_impl(a, b, allowed); }

}  // namespace conform
