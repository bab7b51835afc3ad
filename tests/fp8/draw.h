// tests/fp8/draw.h — the float32 inputs of the FP8 conversion vectors, drawn
// with integers only, so that scripts/ort-fp8-vectors.js (ONNX Runtime, at a
// desk) and tests/test_fp8.cpp (conform) convert the same bits:
//   every value of e4m3 and e5m2 and every midpoint between neighbours, each
//   with the float32 one ulp either side, each sign;
//   2^20 random floats, any sign and mantissa, exponents 2^-20 .. 2^18 (xorshift64).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace conform::test {

constexpr int kFp8Random = 1 << 20;
constexpr int kFp8Chunk = 1 << 16;

inline std::vector<uint32_t> fp8_inputs() {
    std::vector<uint32_t> bits;
    auto around = [&](double v) {
        const float f = static_cast<float>(v);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        for (int d : {-1, 0, 1}) {
            bits.push_back(b + static_cast<uint32_t>(d));
            bits.push_back((b + static_cast<uint32_t>(d)) | 0x80000000u);
        }
    };
    const int formats[2][3] = {{3, 7, 8}, {2, 15, 15}};  // mantissa bits, bias, largest exponent
    for (const auto& f : formats)
        for (int e = 1 - f[1] - f[0]; e <= f[2] + 2; ++e)
            for (int m = 0; m < (2 << f[0]); ++m) {
                around(std::ldexp(m, e));
                around(std::ldexp(m + 0.5, e));
            }
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < kFp8Random; ++i) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        const uint32_t e = 107 + static_cast<uint32_t>(r % 39), mant = static_cast<uint32_t>((r >> 8) & 0x7FFFFF),
                       s = static_cast<uint32_t>((r >> 40) & 1);
        bits.push_back((s << 31) | (e << 23) | mant);
    }
    return bits;
}

// FNV-1a 64 over 32-bit words' little-endian bytes.
inline uint64_t fnv1a(const uint32_t* w, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i)
        for (int k = 0; k < 4; ++k) {
            h ^= (w[i] >> (8 * k)) & 0xFFu;
            h *= 0x100000001b3ull;
        }
    return h;
}

}  // namespace conform::test
