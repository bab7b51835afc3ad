#include "simd/rope_table.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace conform::simd {

namespace {

constexpr double kPi = 3.14159265358979323846;

bool same(const RopeParams& a, const RopeParams& b) {
    return a.head_dim == b.head_dim && a.layout == b.layout && a.theta == b.theta && a.scaling == b.scaling &&
           a.rotary() == b.rotary();
}

// inv_freq[i], i < rd/2, for every scaling but dynamic (HF modeling_rope_utils.py).
void scaled_inv_freq(const RopeParams& p, std::vector<double>& out) {
    const size_t rd = static_cast<size_t>(p.rotary());
    const RopeScaling& s = p.scaling;
    const double orig = static_cast<double>(s.original_max_position);
    out.resize(rd / 2);
    double low = 0, high = 1;  // yarn's ramp ends
    if (s.type == RopeScalingType::yarn) {
        auto dim_of = [&](double turns) {  // find_correction_dim
            return static_cast<double>(rd) * std::log(orig / (turns * 2 * kPi)) / (2 * std::log(p.theta));
        };
        const double lo = dim_of(s.beta_fast), hi = dim_of(s.beta_slow);  // truncate: floor / ceil
        low = std::max(s.truncate ? std::floor(lo) : lo, 0.0);
        high = std::min(s.truncate ? std::ceil(hi) : hi, static_cast<double>(rd) - 1);
        if (low == high) high += 0.001;
    }
    for (size_t i = 0; i < rd / 2; ++i) {
        // inv_freq = 1.0 / (theta ** (arange(0, rd, 2) / rd))
        const double f = std::pow(p.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rd));
        double g = f;
        switch (s.type) {
            case RopeScalingType::none: break;
            case RopeScalingType::dynamic: throw std::logic_error("simd RopeTable: dynamic NTK not resolved");
            case RopeScalingType::linear: g = f / s.factor; break;
            case RopeScalingType::llama3: {
                const double wavelen = 2 * kPi / f;
                if (wavelen > orig / s.low_freq_factor) {
                    g = f / s.factor;
                } else if (wavelen >= orig / s.high_freq_factor) {
                    const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                    g = (1 - smooth) * f / s.factor + smooth * f;
                }
                break;
            }
            case RopeScalingType::yarn: {
                const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
                g = f / s.factor * ramp + f * (1 - ramp);
                break;
            }
        }
        out[i] = g;
    }
}

}  // namespace

int64_t rope_seq_len(const int64_t* pos, size_t n) {
    int64_t last = 0;
    for (size_t i = 0; i < n; ++i) last = std::max(last, pos[i]);
    return last + 1;
}

RopeParams rope_for_call(const RopeParams& p, int64_t seq_len) {
    if (p.scaling.type != RopeScalingType::dynamic) return p;
    RopeParams r = p;
    const RopeScaling& s = p.scaling;
    const double orig = static_cast<double>(s.original_max_position), L = static_cast<double>(seq_len);
    if (L > orig) {
        const double rd = static_cast<double>(p.rotary());
        r.theta = p.theta * std::pow(s.factor * L / orig - (s.factor - 1), rd / (rd - 2));
    }
    r.scaling = RopeScaling{};
    return r;
}

void RopeTable::set_params(const RopeParams& p) {
    p_ = p;
    rd_ = static_cast<size_t>(p.rotary());
    mscale_ = p.scaling.type == RopeScalingType::yarn ? p.scaling.attention_factor : 1.0;
    scaled_inv_freq(p, inv_freq_);
    dense_.clear();
    filled_ = 0;
}

void RopeTable::fill(int64_t pos, float* row) const {
    const size_t half = rd_ / 2;
    float* cs = row;
    float* sn = row + rd_;
    for (size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos) * inv_freq_[i];
        const float c = static_cast<float>(std::cos(angle) * mscale_);
        const float s = static_cast<float>(std::sin(angle) * mscale_);
        // neox pairs (i, i + rd/2); interleaved pairs (2i, 2i + 1); the first of
        // a pair takes -sin (x_a c - x_b s), the second +sin (x_b c + x_a s).
        const size_t a = p_.layout == RopeLayout::neox ? i : 2 * i;
        const size_t b = p_.layout == RopeLayout::neox ? i + half : 2 * i + 1;
        cs[a] = cs[b] = c;
        sn[a] = -s;
        sn[b] = s;
    }
}

RopeRows RopeTable::rows(const int64_t* pos, size_t n, const RopeParams& p) {
    if (rd_ == 0 || !same(p, p_)) set_params(p);
    const size_t w = 2 * rd_;
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
        for (int64_t q = filled_; q < to; ++q) fill(q, dense_.data() + static_cast<size_t>(q) * w);
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
    return RopeRows{ptrs_.data(), static_cast<size_t>(p.head_dim), rd_, p.layout};
}

}  // namespace conform::simd
