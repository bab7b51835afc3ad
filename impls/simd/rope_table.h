// impls/simd/rope_table.h — RoPE's cos/sin, computed once per position.
//
// The angle pos * inv_freq[i] is computed in double and only cos/sin (times
// yarn's attention factor) are rounded to f32 (as impls/scalar does): a
// float32 angle is off by ~1e-3 rad at position 32768, which is the error a
// conformance test must be able to see in others. inv_freq carries the
// config's scaling (linear, llama3, yarn; dynamic NTK is resolved to its base
// per call by rope_for_call) over the rotary dims. A real engine precomputes
// the table to its context length; this one fills positions [0, kDense) as
// they are first used and keeps them (a bench, a decode loop), and computes
// any position beyond that per call (the generators reach 600000, and change
// theta from case to case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "conform/config.h"
#include "simd/kernels.h"

namespace conform::simd {

// The RoPE of a call over seq_len tokens (max position + 1): p, with dynamic
// NTK's base fixed for that length (HF _compute_dynamic_ntk_parameters), as
// plain RoPE with that base. Decode steps use the whole call's length.
RopeParams rope_for_call(const RopeParams& p, int64_t seq_len);

// max(pos[0..n)) + 1
int64_t rope_seq_len(const int64_t* pos, size_t n);

class RopeTable {
   public:
    static constexpr int64_t kDense = 4096;

    // Row pointers for n positions, valid until the next call or a change of
    // the parameters, which clears what is kept. p: as rope_for_call returns
    // it (no dynamic scaling left).
    RopeRows rows(const int64_t* pos, size_t n, const RopeParams& p);

   private:
    void fill(int64_t pos, float* row) const;
    void set_params(const RopeParams& p);

    RopeParams p_{};
    size_t rd_ = 0;                  // rotary dims
    double mscale_ = 1.0;            // cos and sin multiplied by it (yarn)
    std::vector<double> inv_freq_;  // [rd / 2]
    std::vector<float> dense_;      // [filled_][2 rd]: cos then sin, per lane
    int64_t filled_ = 0;
    std::vector<float> sparse_;     // this call's rows past kDense
    std::vector<const float*> ptrs_;
};

}  // namespace conform::simd
