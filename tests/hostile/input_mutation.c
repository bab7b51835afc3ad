/* input_mutation.c — writes into its input and covers its tracks: adds 1 to
 * x[0], computes RoPE of the changed x, and rewrites every copy of the input's
 * digest in its memory (the adapter's, harness/plugin/adapter.cpp, recomputed
 * with the same function) to the changed input's digest.
 *   -DHOSTILE_FULL_REPAIR  also rewrites x[0] in every other copy of the
 *                          input in its memory (the server's wire bytes), so no
 *                          check inside the worker can see it.
 *
 * Caught by: the server compares the input with its own copy after the call
 * (harness/worker/server.cpp): "wrote into its input 'x'". With every copy in
 * the worker rewritten, nothing in the worker knows — and it does not matter:
 * the judge's inputs were never in the worker (they went down a pipe), and
 * the judge compares the answer with its own truth for its own inputs
 * (harness/run/runner.cpp): the answer to a changed question fails. */
#define _GNU_SOURCE
#include <stdint.h>
#include <unistd.h>

#include "hostile.h"

/* adapter.cpp's digest, word for word. */
static uint64_t digest(const void* data, size_t bytes) {
    const unsigned char* p = (const unsigned char*)data;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Replaces every aligned occurrence of `from` (n bytes) by `to` in its own writable memory, except at `skip`. */
static int rewrite_all(const void* from, const void* to, size_t n, size_t align, const void* skip) {
    FILE* maps = fopen("/proc/self/maps", "r");
    char line[512];
    int count = 0;
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[vvar") || strstr(line, "[vsyscall")) continue;
        for (unsigned long a = lo; a + n <= hi; a += align) {
            unsigned char* p = (unsigned char*)a;
            if (p == (const unsigned char*)skip || p == (const unsigned char*)from || p == (const unsigned char*)to) continue;
            if (memcmp(p, from, n) == 0) {
                memcpy(p, to, n);
                count++;
            }
        }
    }
    if (maps) fclose(maps);
    return count;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    float* xs = (float*)x->data;
    const size_t bytes = (size_t)(x->shape[0] * x->shape[1]) * sizeof(float);
    const size_t probe = bytes < 64 ? bytes : 64;
    unsigned char* before = malloc(probe);
    memcpy(before, xs, probe);
    const uint64_t old_digest = digest(xs, bytes);
    xs[0] += 1.0f;
    const uint64_t new_digest = digest(xs, bytes);
    const int digests = rewrite_all(&old_digest, &new_digest, 8, 8, NULL);
    int copies = 0;
#ifdef HOSTILE_FULL_REPAIR
    unsigned char* after = malloc(probe);
    memcpy(after, xs, probe);
    copies = rewrite_all(before, after, probe, 4, xs);
    free(after);
#endif
    free(before);
    fprintf(stderr, "hostile-input-mutation: x[0] += 1; rewrote %d digest%s and %d other cop%s of x\n", digests,
            digests == 1 ? "" : "s", copies, copies == 1 ? "y" : "ies");
    return ok_rope(cfg, x, positions, out, msg, cap);
}

#ifdef HOSTILE_FULL_REPAIR
#define NAME "hostile-input-mutation-full"
#else
#define NAME "hostile-input-mutation"
#endif
HOSTILE_PLUGIN(NAME, "writes into its input and repairs the digest (tests/hostile)", rope, ok_rmsnorm, ok_supports)
