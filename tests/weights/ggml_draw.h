/* tests/weights/ggml_draw.h — random ggml blocks and the digest of their
 * dequantisation, shared by the test that checks conform's dequantisers
 * (tests/test_dequant.cpp) and the desk program that records ggml's own
 * answers (scripts/ggml-dequant-vectors.c, linked against a ggml the user
 * built). Plain C so that both can include it.
 *
 * A block is random bytes (splitmix64), except that its float16 and float32
 * scale fields are redrawn until finite: every bit pattern of every quant,
 * every finite scale including subnormals, and no NaN for the two sides to
 * spell differently. MXFP4's E8M0 scale is left random (ggml reads 0xFF as
 * 2^127, not NaN, and so must we). */
#ifndef CONFORM_TESTS_GGML_DRAW_H
#define CONFORM_TESTS_GGML_DRAW_H

#include <stdint.h>
#include <string.h>

typedef struct {
    const char* name;
    uint32_t ggml_type;         /* ggml.h's enum ggml_type */
    uint32_t block_elements;
    uint32_t block_bytes;
    int half_offsets[2];        /* float16 scale fields (-1: none) */
    int f32_offset;             /* a float32 scale field (-1: none) */
} conform_ggml_kind;

/* Every block format conform dequantises (harness/weights/stored.cpp). */
static const conform_ggml_kind conform_ggml_kinds[] = {
    {"Q4_0", 2, 32, 18, {0, -1}, -1},     {"Q4_1", 3, 32, 20, {0, 2}, -1},
    {"Q5_0", 6, 32, 22, {0, -1}, -1},     {"Q5_1", 7, 32, 24, {0, 2}, -1},
    {"Q8_0", 8, 32, 34, {0, -1}, -1},     {"Q4_K", 12, 256, 144, {0, 2}, -1},
    {"Q5_K", 13, 256, 176, {0, 2}, -1},   {"Q6_K", 14, 256, 210, {208, -1}, -1},
    {"Q8_K", 15, 256, 292, {-1, -1}, 0},  {"IQ4_NL", 20, 32, 18, {0, -1}, -1},
    {"MXFP4", 39, 32, 17, {-1, -1}, -1},
};
#define CONFORM_GGML_KINDS ((int)(sizeof conform_ggml_kinds / sizeof conform_ggml_kinds[0]))

/* The vectors: this many blocks per kind, digested this many blocks at a time. */
#define CONFORM_GGML_BLOCKS 102400
#define CONFORM_GGML_CHUNK 256
#define CONFORM_GGML_SEED 0x636f6e666f726dULL /* "conform" */

static inline uint64_t conform_splitmix64(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Fills one block of `k` from the stream. */
static inline void conform_ggml_draw(const conform_ggml_kind* k, uint64_t* s, uint8_t* block) {
    for (uint32_t i = 0; i < k->block_bytes; i += 8) {
        const uint64_t r = conform_splitmix64(s);
        const uint32_t n = k->block_bytes - i < 8 ? k->block_bytes - i : 8;
        memcpy(block + i, &r, n);
    }
    for (int h = 0; h < 2; ++h) {
        if (k->half_offsets[h] < 0) continue;
        uint16_t v;
        memcpy(&v, block + k->half_offsets[h], 2);
        while (((v >> 10) & 0x1F) == 0x1F) v = (uint16_t)conform_splitmix64(s);
        memcpy(block + k->half_offsets[h], &v, 2);
    }
    if (k->f32_offset >= 0) {
        uint32_t v;
        memcpy(&v, block + k->f32_offset, 4);
        while (((v >> 23) & 0xFF) == 0xFF) v = (uint32_t)conform_splitmix64(s);
        memcpy(block + k->f32_offset, &v, 4);
    }
}

/* FNV-1a over the float32 bit patterns, in order. */
static inline uint64_t conform_fnv1a(uint64_t h, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        for (int j = 0; j < 4; ++j) {
            h ^= (b >> (8 * j)) & 0xFF;
            h *= 0x100000001B3ULL;
        }
    }
    return h;
}
#define CONFORM_FNV_OFFSET 0xCBF29CE484222325ULL

#endif
