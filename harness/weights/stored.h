// harness/weights/stored.h — one tensor as a checkpoint stores it, and its
// decoding to float32.
//
// Both readers describe a tensor the same way: row-major, slowest dimension
// first (PyTorch's order; GGUF's ne[] reversed), so a 2-D weight is
// [rows, cols] = [out, in] in either format, and a row is `cols` consecutive
// elements in the file. Decoding works a row range at a time, straight from
// the mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conform::weights {

// The element encodings the readers decode: plain floats, and ggml's block
// formats (ggml_blocks.h has each block's layout and formula), decoded
// bit-identically to ggml's own dequantisers.
enum class Encoding { f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, q8_k, iq4_nl, mxfp4 };

const char* to_string(Encoding e);  // "F32", "Q4_K", ... (ggml's names)
int64_t block_elements(Encoding e);  // 1 for plain floats, 32 or 256 for the block formats
int64_t block_bytes(Encoding e);     // a block's (or an element's) bytes
bool is_quantised(Encoding e);
// "F32, F16, BF16, Q4_0, ...": every encoding, for a refusal's message.
std::string encodings_read();

// `n` elements (a multiple of the block) from `src` into `dst`, as the format
// defines them, without judging them: decode_rows refuses what is not finite.
void dequantise(Encoding e, const uint8_t* src, int64_t n, float* dst);

struct StoredTensor {
    std::string file;            // the file it is in (messages)
    std::string name;            // the file's name for it
    std::vector<int64_t> shape;  // row-major, slowest first
    Encoding encoding = Encoding::f32;
    const uint8_t* data = nullptr;  // its first byte, inside the mapping
    uint64_t nbytes = 0;

    int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
    int64_t rows() const;  // the product of every dimension but the last
    int64_t numel() const { return rows() * cols(); }
};

// Decodes rows [r0, r1) into out[(r1 - r0) * cols()]. A value that is not
// finite is refused (WeightsError naming file, tensor and element): no real
// checkpoint holds one, and it would only surface later as a NaN verdict.
void decode_rows(const StoredTensor& t, int64_t r0, int64_t r1, float* out);

// IEEE binary16 and bfloat16 to float32 (exact: every value is representable).
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);

// "[4, 8]"
std::string shape_string(const std::vector<int64_t>& s);

// Text from a damaged file made fit for a one-line message: every byte
// outside printable ASCII becomes '?'.
std::string printable(std::string s);

}  // namespace conform::weights
