#include "simd/rope_table.h"

#include <algorithm>
#include <cmath>

namespace conform::simd {

void RopeTable::fill(int64_t pos, float* row) const {
    const size_t half = hd_ / 2;
    float* cs = row;
    float* sn = row + hd_;
    for (size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos) * inv_freq_[i];
        const float c = static_cast<float>(std::cos(angle));
        const float s = static_cast<float>(std::sin(angle));
        // neox pairs (i, i + hd/2); interleaved pairs (2i, 2i + 1); the first of
        // a pair takes -sin (x_a c - x_b s), the second +sin (x_b c + x_a s).
        const size_t a = layout_ == RopeLayout::neox ? i : 2 * i;
        const size_t b = layout_ == RopeLayout::neox ? i + half : 2 * i + 1;
        cs[a] = cs[b] = c;
        sn[a] = -s;
        sn[b] = s;
    }
}

RopeRows RopeTable::rows(const int64_t* pos, size_t n, size_t hd, RopeLayout layout, double theta) {
    if (hd != hd_ || layout != layout_ || theta != theta_) {
        hd_ = hd;
        layout_ = layout;
        theta_ = theta;
        inv_freq_.resize(hd / 2);
        // inv_freq = 1.0 / (theta ** (arange(0, hd, 2) / hd))
        for (size_t i = 0; i < hd / 2; ++i)
            inv_freq_[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
        dense_.clear();
        filled_ = 0;
    }
    const size_t w = 2 * hd;
    int64_t need = 0;
    size_t beyond = 0;
    for (size_t i = 0; i < n; ++i) {
        if (pos[i] < kDense)
            need = std::max(need, pos[i] + 1);
        else
            ++beyond;
    }
    if (need > filled_) {
        // Grow geometrically so a decode loop does not refill per token.
        const int64_t to = std::min<int64_t>(kDense, std::max<int64_t>(need, 2 * filled_));
        dense_.resize(static_cast<size_t>(to) * w);
        for (int64_t p = filled_; p < to; ++p) fill(p, dense_.data() + static_cast<size_t>(p) * w);
        filled_ = to;
    }
    sparse_.resize(beyond * w);
    ptrs_.resize(n);
    size_t next = 0;
    for (size_t i = 0; i < n; ++i) {
        if (pos[i] < kDense) {
            ptrs_[i] = dense_.data() + static_cast<size_t>(pos[i]) * w;
        } else {
            float* row = sparse_.data() + next++ * w;
            fill(pos[i], row);
            ptrs_[i] = row;
        }
    }
    return RopeRows{ptrs_.data(), hd, layout};
}

}  // namespace conform::simd
