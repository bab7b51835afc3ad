/* nan_repeat.c — right the first time, NaN every time after: it remembers a
 * hash of every call's inputs, and a call it has seen before gets NaN in its
 * first element. A harness that checks one call of each case, or the last of
 * a benchmark's repetitions, sees only the first.
 *
 * Caught by: the judge repeats a random subset of calls with the same
 * inputs and compares the answers bit for bit (harness/worker/client.cpp):
 * "nondeterministic"; NaN where the reference is finite fails a case
 * (harness/judge); bench checks every repetition for NaN/Inf and a subset of
 * them against torch (harness/cli/bench.cpp), and never repeats an input
 * there (each repetition's are perturbed), so its trick never fires. */
#include <stdint.h>

#include "hostile.h"

static uint64_t seen[4096];
static size_t n_seen;

static int again(const conform_tensor* x, const conform_tensor* y) {
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char* p = (const unsigned char*)x->data;
    for (int64_t i = 0; i < x->shape[0] * x->shape[1] * 4; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    p = (const unsigned char*)y->data;
    for (int64_t i = 0; i < y->shape[0] * (y->ndim == 2 ? y->shape[1] : 1) * (y->dtype == CONFORM_DTYPE_I64 ? 8 : 4); i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    for (size_t i = 0; i < n_seen; i++)
        if (seen[i] == h) return 1;
    if (n_seen < sizeof seen / sizeof seen[0]) seen[n_seen++] = h;
    return 0;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const int repeat = again(x, positions);
    ok_rope(cfg, x, positions, out, msg, cap);
    if (repeat) ((float*)out->data)[0] = NAN;
    return CONFORM_OK;
}

static int32_t rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t cap) {
    const int repeat = again(x, weight);
    ok_rmsnorm(cfg, x, weight, out, msg, cap);
    if (repeat) ((float*)out->data)[0] = NAN;
    return CONFORM_OK;
}

HOSTILE_PLUGIN("hostile-nan-repeat", "NaN whenever it sees the same inputs again (tests/hostile)", rope, rmsnorm,
               ok_supports)
