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

// The element encodings the readers decode. Q8_0 / Q4_0 are ggml's blocks of
// 32 elements (a float16 scale d, then 32 int8 q: x = d q; or 16 bytes of
// nibbles, low nibbles elements 0..15, high nibbles 16..31: x = d (q - 8)).
enum class Encoding { f32, f16, bf16, q8_0, q4_0 };

const char* to_string(Encoding e);  // "F32", "F16", "BF16", "Q8_0", "Q4_0"
int64_t block_elements(Encoding e);  // 1, or 32 for the block formats
int64_t block_bytes(Encoding e);     // 4, 2, 2, 34, 18
bool is_quantised(Encoding e);

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
