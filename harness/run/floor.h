// harness/run/floor.h — the tolerance model's detection floor, measured:
// into the reference's own output (error 0) one element gets a relative
// error ε (δ = ε·|ref_i|), and the case is judged as an implementation's
// output would be; the smallest ε that fails is that element's floor. A
// bound that is too loose somewhere shows here as a large floor.
//
// Cases are drawn by the op's generator (those with inputs of magnitude 1:
// at 1e-3 the absolute rounding floor 2u·0.3 decides, by design) and given, where the op has
// positions, a last row at a large position (32767 unless `far` says
// otherwise: what long-context users test), so every case holds rows near 0
// and one far away: the floor of the near rows (position < 64) must not be
// the far row's. Elements are those with |ref_i| at least the rms of their
// row: a relative error of a small element (a rotation's partner carries its
// bound) is not a meaningful target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/ops.h"

namespace conform::run {

struct FloorOptions {
    std::vector<Op> ops;
    std::vector<DType> dtypes = {DType::f32, DType::bf16};
    int cases = 20;
    int elements = 8;     // planted per case and class of row
    int64_t far = 32767;  // the large position
    uint64_t seed = 1;
    std::string tensor = "out";  // which output is planted into
};

struct FloorRow {
    Op op;
    DType dtype;
    std::string rows;  // "pos < 64", "pos >= 16384", or "all" (no positions)
    int planted = 0;
    double median = 0, p90 = 0, worst = 0;  // ε of the elements measured
};

std::vector<FloorRow> measure_floor(const FloorOptions& o);

}  // namespace conform::run
