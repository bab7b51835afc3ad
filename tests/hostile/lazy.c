/* lazy.c — computes once and answers from memory ever after: the first call
 * of each op and shape is computed, every later one returns that answer
 * whatever its inputs. Fast in a benchmark that reuses one set of inputs and
 * checks the last output.
 *
 * Caught by: bench rotates its repetitions among several input sets and
 * checks a random subset of repetitions (and one of each set) against torch
 * (harness/cli/bench.cpp): "disagrees with torch"; in the gate, another case
 * of the same shape fails. */
#include "hostile.h"

typedef struct {
    int op;
    int64_t rows, cols;
    float* values;
} Memo;

static Memo memo[64];
static int n_memo;

/* The remembered answer for (op, shape), or NULL after remembering `out` for next time. */
static const Memo* recall(int op, const conform_tensor* out) {
    for (int i = 0; i < n_memo; i++)
        if (memo[i].op == op && memo[i].rows == out->shape[0] && memo[i].cols == out->shape[1]) return &memo[i];
    return NULL;
}

static void keep(int op, const conform_tensor* out) {
    if (n_memo == 64) return;
    const size_t n = (size_t)(out->shape[0] * out->shape[1]);
    memo[n_memo] = (Memo){op, out->shape[0], out->shape[1], malloc(n * sizeof(float))};
    memcpy(memo[n_memo].values, out->data, n * sizeof(float));
    n_memo++;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const Memo* m = recall(CONFORM_OP_ROPE, out);
    if (m) {
        memcpy(out->data, m->values, (size_t)(m->rows * m->cols) * sizeof(float));
        return CONFORM_OK;
    }
    ok_rope(cfg, x, positions, out, msg, cap);
    keep(CONFORM_OP_ROPE, out);
    return CONFORM_OK;
}

static int32_t rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t cap) {
    const Memo* m = recall(CONFORM_OP_RMSNORM, out);
    if (m) {
        memcpy(out->data, m->values, (size_t)(m->rows * m->cols) * sizeof(float));
        return CONFORM_OK;
    }
    ok_rmsnorm(cfg, x, weight, out, msg, cap);
    keep(CONFORM_OP_RMSNORM, out);
    return CONFORM_OK;
}

HOSTILE_PLUGIN("hostile-lazy", "computes each shape once, then replays (tests/hostile)", rope, rmsnorm, ok_supports)
