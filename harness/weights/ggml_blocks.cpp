// Compiled with -ffp-contract=off (harness/CMakeLists.txt): ggml's reference
// dequantisers are built without -march, so `d1 * q - m1` is a multiply then
// a subtract there, and must not become one fused multiply-add here.
#include "weights/ggml_blocks.h"

#include <cstring>

#include "weights/stored.h"

namespace conform::weights::ggml {

namespace {

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_to_float(h);
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block, from
// its 12 packed bytes: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4
// split across the nibbles of byte j + 4 and the top bits of bytes j - 4 and j.
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// The 5th bit of element j (0..31) of a Q5_0 / Q5_1 block, as 0 or 16.
int fifth_bit(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

constexpr int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr int8_t kFp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};  // E2M1, doubled

// E8M0 exponent e as 2^(e - 128): half the block's scale, since kFp4 is doubled.
// ggml reads e = 255 as 2^127, not NaN; so does this.
float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace

void q4_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
        y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
}

void q4_1(const uint8_t* b, float* y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
        y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
}

void q5_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    const uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(((qs[j] & 0x0F) | fifth_bit(qh, j)) - 16) * d;
        y[j + 16] = static_cast<float>(((qs[j] >> 4) | fifth_bit(qh, j + 16)) - 16) * d;
    }
}

void q5_1(const uint8_t* b, float* y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    uint32_t qh;
    std::memcpy(&qh, b + 4, 4);
    const uint8_t* qs = b + 8;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((qs[j] & 0x0F) | fifth_bit(qh, j)) * d + m;
        y[j + 16] = static_cast<float>((qs[j] >> 4) | fifth_bit(qh, j + 16)) * d + m;
    }
}

void q8_0(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void q4_k(const uint8_t* b, float* y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    // Four pairs of sub-blocks; a pair shares 32 bytes, low nibbles then high.
    for (int is = 0; is < 8; is += 2, q += 32) {
        uint8_t sc, m;
        scale_min_k4(is, scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
}

void q5_k(const uint8_t* b, float* y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    // As Q4_K, with each element's 5th bit in qh[l], bit 2 * pair (low) or 2 * pair + 1 (high).
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        uint8_t sc, m;
        scale_min_k4(is, scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

void q6_k(const uint8_t* b, float* y) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    // Two halves of 128; in each, element l + 32 i takes nibble (i / 2) of
    // ql[l + 32 (i % 2)] and bits 2i, 2i + 1 of qh[l]; scales per 16.
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            // (d * sc) * q, left to right, as ggml writes d * sc[is] * q.
            y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
}

void q8_k(const uint8_t* b, float* y) {
    float d;
    std::memcpy(&d, b, 4);
    for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
}

void iq4_nl(const uint8_t* b, float* y) {
    const float d = f16_at(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
        y[j] = d * static_cast<float>(kIq4nl[qs[j] & 0xF]);
        y[j + 16] = d * static_cast<float>(kIq4nl[qs[j] >> 4]);
    }
}

void mxfp4(const uint8_t* b, float* y) {
    const float d = e8m0_half(b[0]);
    const uint8_t* qs = b + 1;
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(kFp4[qs[j] & 0x0F]) * d;
        y[j + 16] = static_cast<float>(kFp4[qs[j] >> 4]) * d;
    }
}

}  // namespace conform::weights::ggml
