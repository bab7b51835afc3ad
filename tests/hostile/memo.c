/* memo.c — answers from memory in `bench`: keeps the answer of every input it
 * has seen (keyed by a hash of the op, the inputs' bytes and the config) and
 * returns it when the same inputs come again. Its answers are right, so the
 * checks against torch pass; bench rotates a few fixed input sets, so after
 * the first round every call is a lookup and it times at the speed of a
 * memcpy. It says on stderr each time it answers from memory.
 *
 * Refused by: bench perturbs a few elements of every repetition's inputs
 * (untimed, drawn per repetition; harness/cli/bench.cpp), and checks the
 * compared repetitions against torch's answer for the inputs as perturbed:
 * no two calls carry the same inputs, so there is nothing to look up. */
#include "hostile.h"

typedef struct {
    uint64_t key;
    size_t n;
    float* values;
} Memo;

static Memo memo[256];
static int n_memo, hits;

static uint64_t fnv(uint64_t h, const void* data, size_t n) {
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint64_t key_of(int op, const conform_tensor* a, const conform_tensor* b, const conform_config* cfg) {
    uint64_t h = fnv(14695981039346656037ull, &op, sizeof op);
    h = fnv(h, a->data, (size_t)(a->shape[0] * a->shape[1]) * sizeof(float));
    h = fnv(h, b->data, (size_t)(b->ndim == 1 ? b->shape[0] : b->shape[0] * b->shape[1]) *
                            (b->dtype == CONFORM_DTYPE_I64 ? 8 : sizeof(float)));
    return fnv(h, &cfg->rope_theta, sizeof cfg->rope_theta);
}

/* The remembered answer into out (1), or 0. */
static int recall(uint64_t key, const conform_tensor* out) {
    const size_t n = (size_t)(out->shape[0] * out->shape[1]);
    for (int i = 0; i < n_memo; i++)
        if (memo[i].key == key && memo[i].n == n) {
            memcpy(out->data, memo[i].values, n * sizeof(float));
            fprintf(stderr, "hostile-memo: answered from memory (%d hits)\n", ++hits);
            return 1;
        }
    return 0;
}

static void keep(uint64_t key, const conform_tensor* out) {
    if (n_memo == 256) return;
    const size_t n = (size_t)(out->shape[0] * out->shape[1]);
    memo[n_memo].key = key;
    memo[n_memo].n = n;
    memo[n_memo].values = malloc(n * sizeof(float));
    memcpy(memo[n_memo].values, out->data, n * sizeof(float));
    n_memo++;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const uint64_t key = key_of(1, x, positions, cfg);
    if (recall(key, out)) return CONFORM_OK;
    const int32_t r = ok_rope(cfg, x, positions, out, msg, cap);
    keep(key, out);
    return r;
}

static int32_t rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t cap) {
    const uint64_t key = key_of(0, x, weight, cfg);
    if (recall(key, out)) return CONFORM_OK;
    const int32_t r = ok_rmsnorm(cfg, x, weight, out, msg, cap);
    keep(key, out);
    return r;
}

HOSTILE_PLUGIN("hostile-memo", "answers inputs it has seen from memory (tests/hostile)", rope, rmsnorm, ok_supports)
