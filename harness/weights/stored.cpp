#include "weights/stored.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "weights/error.h"

namespace conform::weights {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the readers decode little-endian files in place");

namespace {

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

float load_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// One row of `n` elements from `src` into `dst`.
void decode_row(Encoding e, const uint8_t* src, int64_t n, float* dst) {
    switch (e) {
        case Encoding::f32:
            for (int64_t i = 0; i < n; ++i) dst[i] = load_f32(src + 4 * i);
            return;
        case Encoding::f16:
            for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(load_u16(src + 2 * i));
            return;
        case Encoding::bf16:
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(load_u16(src + 2 * i));
            return;
        case Encoding::q8_0:
            for (int64_t b = 0; b < n / 32; ++b) {
                const uint8_t* blk = src + 34 * b;
                const float d = half_to_float(load_u16(blk));
                for (int j = 0; j < 32; ++j) dst[32 * b + j] = d * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
            }
            return;
        case Encoding::q4_0:
            for (int64_t b = 0; b < n / 32; ++b) {
                const uint8_t* blk = src + 18 * b;
                const float d = half_to_float(load_u16(blk));
                for (int j = 0; j < 16; ++j) {
                    dst[32 * b + j] = d * static_cast<float>((blk[2 + j] & 0x0F) - 8);
                    dst[32 * b + j + 16] = d * static_cast<float>((blk[2 + j] >> 4) - 8);
                }
            }
            return;
    }
}

}  // namespace

const char* to_string(Encoding e) {
    switch (e) {
        case Encoding::f32: return "F32";
        case Encoding::f16: return "F16";
        case Encoding::bf16: return "BF16";
        case Encoding::q8_0: return "Q8_0";
        case Encoding::q4_0: return "Q4_0";
    }
    return "?";
}

int64_t block_elements(Encoding e) { return is_quantised(e) ? 32 : 1; }

int64_t block_bytes(Encoding e) {
    switch (e) {
        case Encoding::f32: return 4;
        case Encoding::f16:
        case Encoding::bf16: return 2;
        case Encoding::q8_0: return 2 + 32;
        case Encoding::q4_0: return 2 + 16;
    }
    return 0;
}

bool is_quantised(Encoding e) { return e == Encoding::q8_0 || e == Encoding::q4_0; }

int64_t StoredTensor::rows() const {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
}

void decode_rows(const StoredTensor& t, int64_t r0, int64_t r1, float* out) {
    const int64_t n = t.cols();
    const uint64_t row = static_cast<uint64_t>(n / block_elements(t.encoding) * block_bytes(t.encoding));
    if (r0 < 0 || r1 < r0 || r1 > t.rows() || static_cast<uint64_t>(r1) * row > t.nbytes)
        throw WeightsError(t.file + ": " + t.name + ": rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                           ") asked of a tensor of shape " + shape_string(t.shape));
    for (int64_t r = r0; r < r1; ++r) {
        float* dst = out + (r - r0) * n;
        decode_row(t.encoding, t.data + static_cast<uint64_t>(r) * row, n, dst);
        for (int64_t c = 0; c < n; ++c)
            if (!std::isfinite(dst[c])) {
                std::ostringstream o;
                o << t.file << ": " << t.name << ": element [" << r << ", " << c << "] is " << dst[c] << " ("
                  << to_string(t.encoding) << "): a checkpoint's weights must be finite";
                throw WeightsError(o.str());
            }
    }
}

float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t man = h & 0x3FFu;
    if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
        const float v = std::ldexp(static_cast<float>(man), -24);
        return sign ? -v : v;
    }
    const uint32_t bits = exp == 31 ? (sign | 0x7F800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

float bf16_to_float(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

std::string printable(std::string s) {
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    return s;
}

std::string shape_string(const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
    return o + "]";
}

}  // namespace conform::weights
