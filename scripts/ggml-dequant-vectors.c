/* scripts/ggml-dequant-vectors.c — a desk program, not part of the build:
 * records ggml's own dequantisation of the random blocks that
 * tests/weights/ggml_draw.h draws, as per-chunk digests, into the vectors file
 * tests/weights/ggml_dequant_vectors.txt that tests/test_dequant.cpp checks
 * conform's dequantisers against, bit for bit.
 *
 * It links against a ggml you fetched and built yourself (nothing here builds
 * one); name its commit on the command line so the file says whose answers
 * they are:
 *
 *   cc -O2 -I tests/weights -I $LLAMA/ggml/include scripts/ggml-dequant-vectors.c \
 *      -L $LLAMA/build/bin -lggml-base -Wl,-rpath,$LLAMA/build/bin -o /tmp/vectors
 *   /tmp/vectors "$(git -C $LLAMA rev-parse HEAD)" > tests/weights/ggml_dequant_vectors.txt
 *
 * ggml-base is compiled without -march (only ggml-cpu's variants are), so no
 * multiply-add is contracted into an FMA on either side. */
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"
#include "ggml_draw.h"

/* ggml's type traits give Q8_K no to_float (it is an activation format), but
 * ggml-base exports its dequantiser. */
void dequantize_row_q8_K(const void* x, float* y, int64_t k);

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GGML_COMMIT\n", argv[0]);
        return 2;
    }
    printf("# ggml's dequantisation of random blocks (tests/weights/ggml_draw.h), ggml at commit %s\n", argv[1]);
    printf("# kind ggml_type blocks chunk then one FNV-1a digest per chunk of blocks\n");
    for (int k = 0; k < CONFORM_GGML_KINDS; ++k) {
        const conform_ggml_kind* kind = &conform_ggml_kinds[k];
        uint8_t* blocks = malloc((size_t)CONFORM_GGML_CHUNK * kind->block_bytes);
        float* out = malloc((size_t)CONFORM_GGML_CHUNK * kind->block_elements * sizeof(float));
        uint64_t s = CONFORM_GGML_SEED ^ ((uint64_t)kind->ggml_type << 32);
        printf("%s %u %d %d", kind->name, kind->ggml_type, CONFORM_GGML_BLOCKS, CONFORM_GGML_CHUNK);
        for (int c = 0; c < CONFORM_GGML_BLOCKS / CONFORM_GGML_CHUNK; ++c) {
            for (int b = 0; b < CONFORM_GGML_CHUNK; ++b) conform_ggml_draw(kind, &s, blocks + (size_t)b * kind->block_bytes);
            const int64_t n = (int64_t)CONFORM_GGML_CHUNK * kind->block_elements;
            if (kind->ggml_type == GGML_TYPE_Q8_K) dequantize_row_q8_K(blocks, out, n);
            else ggml_get_type_traits((enum ggml_type)kind->ggml_type)->to_float(blocks, out, n);
            printf(" %016llx", (unsigned long long)conform_fnv1a(CONFORM_FNV_OFFSET, out, n));
        }
        printf("\n");
        free(blocks);
        free(out);
    }
    return 0;
}
