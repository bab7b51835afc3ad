// conform/dtype.h — the 16-bit float formats, the FP8 formats of a KV
// cache and llama.cpp's activation blocks (Q8_0, Q8_K), written once: their
// bits, and rounding to them (round to nearest even, as hardware converts;
// the blocks as ggml's reference quantisers round). Every implementation,
// the harness and the plugin adapters use these, so "bf16", "e4m3" and
// "q8_0" mean the same rounding everywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

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

// ---- FP8 (OCP 8-bit floating point, as vLLM, FlashInfer and CUDA's
// __nv_fp8_e4m3 / __nv_fp8_e5m2 store a KV cache) ---------------------------
//   e4m3 (E4M3FN): sign, 4 exponent bits (bias 7), 3 mantissa bits; no
//        infinity, S.1111.111 is NaN, so the largest value is 448 = 0x7E;
//        subnormals down to 2^-9.
//   e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits; IEEE-like
//        (exponent 31: infinity, NaN); largest 57344 = 0x7B; subnormals to 2^-16.
struct Fp8Format {
    int mantissa_bits;  // M
    int bias;
    double max;         // largest finite value
    uint8_t overflow;   // the code of +overflow without saturation: NaN (e4m3), +inf (e5m2)
};
inline Fp8Format fp8_format(KvCacheDtype d) {
    return d == KvCacheDtype::fp8_e5m2 ? Fp8Format{2, 15, 57344.0, 0x7C} : Fp8Format{3, 7, 448.0, 0x7F};
}

// How a value is converted: the contract's (round to nearest even, saturate
// at ±max: CUDA's __NV_SATFINITE, vLLM's cache write) or a kernel's mistake.
struct Fp8Rounding {
    bool truncate = false;  // toward zero instead of to nearest even
    bool saturate = true;   // false: past ±max becomes NaN (e4m3) or ±inf (e5m2)
};

// float -> FP8 code. NaN stays NaN (0x7F | sign). On the float's bits, as
// bf16_bits rounds (a cache write converts every value it stores: the
// conversion must cost a few integer operations, not a frexp).
inline uint8_t fp8_bits(float f, KvCacheDtype d, Fp8Rounding how = {}) {
    const Fp8Format F = fp8_format(d);
    const uint32_t b = float_bits(f), sign = (b >> 24) & 0x80u, a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7F);
    const int M = F.mantissa_bits, emin = 1 - F.bias;
    const uint32_t overflow = sign | (how.saturate ? (F.overflow == 0x7F ? 0x7Eu : 0x7Bu) : F.overflow);
    const uint32_t max_bits = float_bits(static_cast<float>(F.max));
    if (a < static_cast<uint32_t>(127 + emin) << 23) {
        // Below the smallest normal: a multiple of 2^(emin - M), scaled exactly to an integer
        // count n <= 2^M (n = 2^M is the smallest normal, whose code is the same bits).
        const float q = bits_float(a) * std::ldexp(1.0f, M - emin);
        const float n = how.truncate ? std::floor(q) : std::nearbyint(q);
        return static_cast<uint8_t>(sign | static_cast<uint32_t>(n));
    }
    const int shift = 23 - M;
    uint32_t r = how.truncate ? a >> shift : (a + (1u << (shift - 1)) - 1u + ((a >> shift) & 1u)) >> shift;
    if ((r << shift) > max_bits) return static_cast<uint8_t>(overflow);  // past the max (infinity included)
    // r holds the float's exponent and the top M mantissa bits: rebias the exponent.
    r -= static_cast<uint32_t>(127 - F.bias) << M;
    return static_cast<uint8_t>(sign | r);
}

// FP8 code -> float (exact), through the format's table of 256.
namespace detail {
inline float fp8_decode(uint8_t code, KvCacheDtype d) {
    const Fp8Format F = fp8_format(d);
    const int M = F.mantissa_bits, E = 7 - M;
    const int ef = (code >> M) & ((1 << E) - 1), mf = code & ((1 << M) - 1);
    float v;
    if (d == KvCacheDtype::fp8_e4m3 && ef == 15 && mf == 7) v = NAN;
    else if (d == KvCacheDtype::fp8_e5m2 && ef == 31) v = mf == 0 ? INFINITY : NAN;
    else if (ef == 0) v = static_cast<float>(std::ldexp(static_cast<double>(mf), 1 - F.bias - M));
    else v = static_cast<float>(std::ldexp(static_cast<double>((1 << M) + mf), ef - F.bias - M));
    return (code & 0x80) ? -v : v;
}
struct Fp8Table {
    float v[2][256];
    Fp8Table() {
        for (int c = 0; c < 256; ++c) {
            v[0][c] = fp8_decode(static_cast<uint8_t>(c), KvCacheDtype::fp8_e4m3);
            v[1][c] = fp8_decode(static_cast<uint8_t>(c), KvCacheDtype::fp8_e5m2);
        }
    }
};
}  // namespace detail
inline float fp8_float(uint8_t code, KvCacheDtype d) {
    static const detail::Fp8Table table;
    return table.v[d == KvCacheDtype::fp8_e5m2 ? 1 : 0][code];
}

// An FP8 cache's read, tabled for a kernel that looks codes up:
// table[g * 256 + c] = code c's value * kv head g's scale, for K or V.
inline std::vector<float> fp8_read_table(const PagedAttentionParams& p, bool is_v) {
    std::vector<float> table(static_cast<size_t>(p.n_kv_heads * 256));
    for (int64_t g = 0; g < p.n_kv_heads; ++g)
        for (int c = 0; c < 256; ++c)
            table[static_cast<size_t>(g * 256 + c)] = fp8_float(static_cast<uint8_t>(c), p.kv_cache_dtype) * p.kv_scale(is_v, g);
    return table;
}

// Every kv head's scale for K or V (the one, repeated, when per tensor).
inline std::vector<float> kv_scales_per_head(const PagedAttentionParams& p, bool is_v) {
    std::vector<float> s(static_cast<size_t>(p.n_kv_heads));
    for (int64_t g = 0; g < p.n_kv_heads; ++g) s[static_cast<size_t>(g)] = p.kv_scale(is_v, g);
    return s;
}

// The value x / scale takes in the cache, and back: fp8(x / scale) * scale
// is what a reader of the cache sees (the division in float32, as a cache
// write computes it).
inline float fp8_round(float f, KvCacheDtype d, Fp8Rounding how = {}) { return fp8_float(fp8_bits(f, d, how), d); }

// The activations of a weight product as a llama.cpp CPU kernel feeds it
// (ActQuant, config.h): y[0, n) = x quantised per block along the row and
// dequantised, in float32 as ggml's reference quantisers compute it. A row
// whose length is not a multiple of the block ends in a shorter block,
// quantised the same way over its own elements (ggml itself needs whole
// blocks; an implementation that does too declines such a case).
//   q8_0 (quantize_row_q8_0_ref): d = amax / 127, id = d ? 1 / d : 0,
//        q = roundf(x · id) (ties away from zero), x' = q · f16(d).
//   q8_k (quantize_row_q8_K_ref): m = the first element of largest magnitude
//        (signed), iscale = -127 / m, q = min(127, rint(iscale · x)) (ties to
//        even), x' = (1 / iscale) · q; a block of zeros stays zero.
// A block whose stored scale is 0 — f16(d) underflows (amax below about
// 4e-6) for q8_0, 1 / iscale for an m of about 4e-37 or less for q8_k —
// dequantises to zeros: ggml's codes there are inf · 0 (undefined in its
// int8 cast), and every code times a zero scale is zero.
inline int64_t act_quant_block(ActQuant q) { return q == ActQuant::q8_0 ? 32 : q == ActQuant::q8_k ? 256 : 0; }
inline void act_quant_row(const float* x, float* y, int64_t n, ActQuant q) {
    const int64_t B = act_quant_block(q);
    if (B == 0) {
        std::copy(x, x + n, y);
        return;
    }
    for (int64_t b0 = 0; b0 < n; b0 += B) {
        const int64_t len = std::min(B, n - b0);
        const float* xb = x + b0;
        float* yb = y + b0;
        if (q == ActQuant::q8_0) {
            float amax = 0.0f;
            for (int64_t j = 0; j < len; ++j) amax = std::max(amax, std::fabs(xb[j]));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            const float dq = f16_float(f16_bits(d));
            if (dq == 0.0f) {
                std::fill(yb, yb + len, 0.0f);
                continue;
            }
            for (int64_t j = 0; j < len; ++j) yb[j] = std::round(xb[j] * id) * dq;
        } else {
            float amax = 0.0f, m = 0.0f;
            for (int64_t j = 0; j < len; ++j)
                if (std::fabs(xb[j]) > amax) amax = std::fabs(xb[j]), m = xb[j];
            if (amax == 0.0f) {
                std::fill(yb, yb + len, 0.0f);
                continue;
            }
            const float iscale = -127.0f / m;
            const float d = 1.0f / iscale;
            if (d == 0.0f) {
                std::fill(yb, yb + len, 0.0f);
                continue;
            }
            for (int64_t j = 0; j < len; ++j) yb[j] = d * std::min(127.0f, std::nearbyint(iscale * xb[j]));
        }
    }
}

// Unit roundoff: half the distance from 1 to the next value.
inline double unit_roundoff(DType dtype) {
    return dtype == DType::f32 ? std::ldexp(1.0, -24) : dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

}  // namespace conform
