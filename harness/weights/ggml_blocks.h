// harness/weights/ggml_blocks.h — ggml's quantised block formats, one block
// to float32 each, computed exactly as ggml's reference dequantisers compute
// them (ggml/src/ggml-quants.c, dequantize_row_*): the same float32
// operations in the same order, so the result is bit-identical.
// tests/test_dequant.cpp holds them to ggml's own answers on 102,400 random
// blocks per format (tests/weights/ggml_dequant_vectors.txt).
//
// Each reads `block` (the format's bytes, little-endian) and writes its
// elements to `y`. Formats of 32 elements put elements 0..15 in the low
// nibbles (or bytes) and 16..31 in the high; the K formats are super-blocks
// of 256 in sub-blocks of 32 (Q4_K, Q5_K: 6-bit scale and min per sub-block,
// x = d sc q - dmin m) or 16 (Q6_K: int8 scale, x = d sc (q - 32)).
#pragma once

#include <cstdint>

namespace conform::weights::ggml {

void q4_0(const uint8_t* block, float* y);    // {f16 d, u8 qs[16]}: d (q - 8)
void q4_1(const uint8_t* block, float* y);    // {f16 d, f16 m, u8 qs[16]}: q d + m
void q5_0(const uint8_t* block, float* y);    // {f16 d, u8 qh[4], u8 qs[16]}: (q5 - 16) d
void q5_1(const uint8_t* block, float* y);    // {f16 d, f16 m, u8 qh[4], u8 qs[16]}: q5 d + m
void q8_0(const uint8_t* block, float* y);    // {f16 d, i8 qs[32]}: q d
void q4_k(const uint8_t* block, float* y);    // {f16 d, f16 dmin, u8 scales[12], u8 qs[128]}
void q5_k(const uint8_t* block, float* y);    // {f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]}
void q6_k(const uint8_t* block, float* y);    // {u8 ql[128], u8 qh[64], i8 scales[16], f16 d}
void q8_k(const uint8_t* block, float* y);    // {f32 d, i8 qs[256], i16 bsums[16]}: d q
void iq4_nl(const uint8_t* block, float* y);  // {f16 d, u8 qs[16]}: d kvalues_iq4nl[q]
void mxfp4(const uint8_t* block, float* y);   // {u8 e (E8M0), u8 qs[16]}: 2^(e-128) kvalues_fp4[q]

}  // namespace conform::weights::ggml
