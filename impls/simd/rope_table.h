// impls/simd/rope_table.h — RoPE's cos/sin, computed once per position.
//
// The angle pos * theta^(-2i/hd) is computed in double and only cos/sin are
// rounded to f32 (as impls/scalar does): a float32 angle is off by ~1e-3 rad
// at position 32768, which is the error a conformance test must be able to
// see in others. A real engine precomputes the table to its context length;
// this one fills positions [0, kDense) as they are first used and keeps them
// (a bench, a decode loop), and computes any position beyond that per call
// (the generators reach 600000, and change theta from case to case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conform/config.h"
#include "simd/kernels.h"

namespace conform::simd {

class RopeTable {
   public:
    static constexpr int64_t kDense = 4096;

    // Row pointers for n positions, valid until the next call or a change of
    // (hd, layout, theta), which clears what is kept.
    RopeRows rows(const int64_t* pos, size_t n, size_t hd, RopeLayout layout, double theta);

   private:
    void fill(int64_t pos, float* row) const;

    size_t hd_ = 0;
    RopeLayout layout_ = RopeLayout::neox;
    double theta_ = 0;
    std::vector<double> inv_freq_;  // [hd / 2]
    std::vector<float> dense_;      // [filled_][2 hd]: cos then sin, per lane
    int64_t filled_ = 0;
    std::vector<float> sparse_;     // this call's rows past kDense
    std::vector<const float*> ptrs_;
};

}  // namespace conform::simd
