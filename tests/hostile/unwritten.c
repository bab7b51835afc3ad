/* unwritten.c — computes every row of RoPE but the last, and leaves that
 * one as it found it: in a harness that reuses its output buffers the last
 * answer is still there and, for a repeated case, right.
 *
 * Caught by: the worker's output buffers are fresh and full of the call's
 * poison (harness/worker/server.cpp); the judge does not deliver an element
 * still at that poison, so its own poisoned buffer reports it
 * (harness/worker/client.cpp deliver(), harness/judge/judge.cpp):
 * "left element N of output 'out' [T,C] unwritten". */
#include "hostile.h"

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    (void)msg;
    (void)cap;
    ok_rope_rows(cfg, x, positions, out, 0, x->shape[0] - 1);
    return CONFORM_OK;
}

HOSTILE_PLUGIN("hostile-unwritten", "leaves its last row unwritten (tests/hostile)", rope, ok_rmsnorm, ok_supports)
