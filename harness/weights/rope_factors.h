// harness/weights/rope_factors.h — a GGUF's per-pair RoPE factors as a
// RopeScaling.
//
// llama.cpp's converter writes Llama 3.1's scaling not as metadata but as the
// tensor rope_freqs.weight: one factor per rotated pair, by which ggml divides
// that pair's frequency (theta_i / f_i). For llama3 scaling the converter
// computes, with wl = 2 pi / inv_freq[i] and L the original context,
//   f = 1 if wl < L / high_freq_factor;  f = factor if wl > L / low_freq_factor;
//   else s = (L / wl - low) / (high - low), f = 1 / ((1 - s) / factor + s).
// The block's RopeScaling has no per-pair field, so the factors are accepted
// only when they are exactly such a table: factor is their maximum, and the
// pairs strictly between 1 and factor fix low and high (s is affine in 1 / wl);
// the table is then recomputed and compared pair by pair.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conform/config.h"

namespace conform::weights {

struct FactorFit {
    RopeScaling scaling;  // llama3, linear (all factors equal), or none (all 1)
    std::string how;      // one line: what was fitted and how well it matched
};

// The factors the converter writes for `s` (llama3) with this theta and rotary dim.
std::vector<double> llama3_factors(double theta, int64_t rotary_dim, const RopeScaling& s);

// `factors` (rotary_dim / 2 of them) as a scaling; `original_context` is L
// when the file records it (rope.scaling.original_context_length), else 0 and
// 8192 is taken (the converter's default; L only scales low and high, the
// frequencies depend on L / low and L / high). Throws WeightsError prefixed
// with `where` when the table is no llama3 table, naming the first pair that
// disagrees.
FactorFit fit_rope_factors(const std::vector<float>& factors, double theta, int64_t rotary_dim,
                           int64_t original_context, const std::string& where);

// Relative agreement required between a stored factor and the recomputed one
// (the converter computes in float32 and stores float32).
constexpr double kFactorTolerance = 1e-5;

}  // namespace conform::weights
