/* memory_hog.c — takes memory and touches it, 64 MiB at a time, until
 * malloc says no; at 3 GiB it stops and answers correctly (no limit held it).
 *
 * Refused by: the worker's address-space limit (RLIMIT_AS, --worker-memory,
 * harness/worker/sandbox.cpp): malloc fails near the limit, the machine's
 * memory is not exhausted, and the call fails naming how far it got. */
#include "hostile.h"

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    enum { kChunk = 64 << 20, kMaxChunks = 48 };
    void* chunks[kMaxChunks];
    int n = 0;
    for (; n < kMaxChunks; n++) {
        chunks[n] = malloc(kChunk);
        if (!chunks[n]) break;
        memset(chunks[n], 0x5a, kChunk);
    }
    for (int i = 0; i < n; i++) free(chunks[i]);
    if (n == kMaxChunks) {
        fprintf(stderr, "hostile-memory-hog: TOOK %d MiB unhindered\n", n * 64);
        return ok_rope(cfg, x, positions, out, msg, cap);
    }
    return hostile_fail(msg, cap, "hostile: malloc failed after %d MiB", n * 64);
}

HOSTILE_PLUGIN("hostile-memory-hog", "allocates until refused (tests/hostile)", rope, ok_rmsnorm, ok_supports)
