// conform/dtype.h — the 16-bit float formats, written once: their bits, and
// rounding to them (round to nearest even, as hardware converts). Every
// implementation, the harness and the plugin adapters use these, so "bf16"
// means the same rounding everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "conform/config.h"

namespace conform {

inline uint32_t float_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
inline float bits_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// float -> bfloat16 bits, round to nearest even on the 16 dropped bits; a NaN
// stays a (quiet) NaN with its payload's top bits.
inline uint16_t bf16_bits(float f) {
    const uint32_t b = float_bits(f);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
    return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
inline float bf16_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }
inline float round_bf16(float f) { return bf16_float(bf16_bits(f)); }

// float -> IEEE half bits, round to nearest even; overflow to infinity,
// subnormals kept, NaN stays NaN.
inline uint16_t f16_bits(float f) {
    uint32_t x = float_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7FFFFFFFu;
    if (x > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
    if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
    if (x < 0x38800000u) {
        // Below half's smallest normal (2^-14): a multiple of 2^-24, scaled exactly, rounded to even.
        const float m = std::nearbyint(bits_float(x) * 16777216.0f);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(m));
    }
    uint32_t r = x - 0x38000000u;  // rebias the exponent from 127 to 15
    r += 0x0FFFu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
}
inline float f16_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        const float v = std::ldexp(static_cast<float>(m), -24);
        return sign ? -v : v;
    }
    if (e == 31) return bits_float(sign | 0x7F800000u | (m << 13));
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// A double rounded to the nearest value of dtype: f32 by a cast; bf16 through
// float32 (as a float -> bf16 cast of a float32 value does); f16 directly from
// the double (11 significant bits, normal exponent >= -14, subnormal step
// 2^-24, overflow to infinity).
inline double round_to(double x, DType dtype) {
    if (!std::isfinite(x)) return x;
    switch (dtype) {
        case DType::f32: return static_cast<double>(static_cast<float>(x));
        case DType::bf16: return round_bf16(static_cast<float>(x));
        case DType::f16: {
            if (x == 0) return 0;
            int e;
            std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
            const int exp = e - 1 < -14 ? -14 : e - 1;
            const double step = std::ldexp(1.0, exp - 10);
            const double r = std::nearbyint(x / step) * step;
            return std::abs(r) > 65504.0 ? std::copysign(INFINITY, x) : r;
        }
    }
    return x;
}

// Unit roundoff: half the distance from 1 to the next value.
inline double unit_roundoff(DType dtype) {
    return dtype == DType::f32 ? std::ldexp(1.0, -24) : dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

}  // namespace conform
