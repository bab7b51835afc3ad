// harness/compare/metrics.h — how far one tensor is from another.
#pragma once

#include <cstdint>
#include <string>

#include "core/case.h"

namespace conform {

// Where an element sits: token (row), and for tensors with heads, head and dim.
struct Location {
    int64_t flat = -1;
    int64_t token = -1;
    int64_t col = -1;
    int64_t head = -1;  // -1 when the tensor has no heads
    int64_t dim = -1;
    std::string str() const;  // "(token 3, head 1, dim 7)" or "(token 3, col 12)"
};

Location locate(int64_t flat, int64_t cols, int64_t head_dim);

struct Metrics {
    int64_t numel = 0;
    double max_abs = 0;      // max |a - b|
    double max_rel = 0;      // max |a - b| / max(|b|, rel_floor)
    double rel_floor = 0;    // 1e-3 * max|b| (so near-zero references do not dominate)
    double nmse = 0;         // sum (a - b)^2 / sum b^2
    double cosine = 1;       // <a, b> / (|a| |b|)
    double max_ref = 0;      // max |b|
    Location worst;          // argmax |a - b|
    double worst_actual = 0, worst_expected = 0;
    bool nonfinite = false;  // NaN or Inf anywhere in a: fails at once
    Location first_nonfinite;
    double nonfinite_value = 0;
};

// a: the values under test (float32 implementation output, or float64), b: the truth.
Metrics measure(const float* a, const DTensor& b, int64_t head_dim);
Metrics measure(const double* a, const DTensor& b, int64_t head_dim);

// How many elements exceed `allowed` (mismatch count).
int64_t count_over(const float* a, const DTensor& b, double allowed);
int64_t count_over(const double* a, const DTensor& b, double allowed);

}  // namespace conform
