#include "weights/stored.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "weights/error.h"
#include "weights/ggml_blocks.h"

namespace conform::weights {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the readers decode little-endian files in place");

namespace {

uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// A plain float is a "block" of one element.
void f32_element(const uint8_t* src, float* y) { std::memcpy(y, src, 4); }
void f16_element(const uint8_t* src, float* y) { *y = half_to_float(load_u16(src)); }
void bf16_element(const uint8_t* src, float* y) { *y = bf16_to_float(load_u16(src)); }

// Every encoding: its name, its block (one element for plain floats) and the
// function that decodes one block.
struct EncodingTraits {
    Encoding encoding;
    const char* name;
    int64_t elements, bytes;
    void (*block)(const uint8_t*, float*);
};
constexpr EncodingTraits kEncodings[] = {
    {Encoding::f32, "F32", 1, 4, f32_element},          {Encoding::f16, "F16", 1, 2, f16_element},
    {Encoding::bf16, "BF16", 1, 2, bf16_element},       {Encoding::q4_0, "Q4_0", 32, 18, ggml::q4_0},
    {Encoding::q4_1, "Q4_1", 32, 20, ggml::q4_1},       {Encoding::q5_0, "Q5_0", 32, 22, ggml::q5_0},
    {Encoding::q5_1, "Q5_1", 32, 24, ggml::q5_1},       {Encoding::q8_0, "Q8_0", 32, 34, ggml::q8_0},
    {Encoding::q4_k, "Q4_K", 256, 144, ggml::q4_k},     {Encoding::q5_k, "Q5_K", 256, 176, ggml::q5_k},
    {Encoding::q6_k, "Q6_K", 256, 210, ggml::q6_k},     {Encoding::q8_k, "Q8_K", 256, 292, ggml::q8_k},
    {Encoding::iq4_nl, "IQ4_NL", 32, 18, ggml::iq4_nl}, {Encoding::mxfp4, "MXFP4", 32, 17, ggml::mxfp4},
};

const EncodingTraits& traits(Encoding e) {
    for (const auto& t : kEncodings)
        if (t.encoding == e) return t;
    return kEncodings[0];  // unreachable: every enumerator has a row
}

}  // namespace

const char* to_string(Encoding e) { return traits(e).name; }
int64_t block_elements(Encoding e) { return traits(e).elements; }
int64_t block_bytes(Encoding e) { return traits(e).bytes; }
bool is_quantised(Encoding e) { return traits(e).elements > 1; }

std::string encodings_read() {
    std::string s;
    for (const auto& t : kEncodings) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

void dequantise(Encoding e, const uint8_t* src, int64_t n, float* dst) {
    if (e == Encoding::f32) {  // most checkpoints' norms and many whole files: a row at once
        std::memcpy(dst, src, static_cast<size_t>(n) * 4);
        return;
    }
    const EncodingTraits& t = traits(e);
    for (int64_t b = 0; b < n / t.elements; ++b) t.block(src + b * t.bytes, dst + b * t.elements);
}

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
        dequantise(t.encoding, t.data + static_cast<uint64_t>(r) * row, n, dst);
        for (int64_t c = 0; c < n; ++c)
            if (!std::isfinite(dst[c])) {
                std::ostringstream o;
                o << t.file << ": " << t.name << ": element [" << r << ", " << c << "] is " << dst[c] << " ("
                  << to_string(t.encoding);
                // A block format's non-finite value comes from its scale: name the block to look at.
                if (is_quantised(t.encoding)) {
                    const int64_t b = c / block_elements(t.encoding);
                    o << ", block " << b << " of row " << r << ", at byte "
                      << static_cast<uint64_t>(r) * row + static_cast<uint64_t>(b * block_bytes(t.encoding)) << " of the tensor";
                }
                o << "): a checkpoint's weights must be finite";
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
