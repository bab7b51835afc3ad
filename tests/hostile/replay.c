/* replay.c — passes by remembering instead of computing. With
 * HOSTILE_TABLE=FILE and HOSTILE_RECORD=1 it computes RoPE and records every
 * answer; without HOSTILE_RECORD it computes nothing and answers from the
 * table. The key, one way per build:
 *   -DHOSTILE_BY_HASH      a hash of the call's inputs and RoPE parameters;
 *   -DHOSTILE_BY_SEED      the call's place in the run (the seed fixes the
 *                          order of the cases); a call identical to the one
 *                          before it is the judge's repeat and gets the same answer;
 *   -DHOSTILE_BY_POINTER   the address of x: computed once per buffer, the
 *                          answer replayed whenever that address comes again
 *                          (no table: the cheat that works when a harness
 *                          reuses its buffers).
 * A miss in a table answers x unchanged (the best guess without computing).
 *
 * Under the seed it was recorded with, a hash or seed table passes: that is
 * the threat. Refused by: --seed random draws cases the table has never seen
 * (harness/cli/flags.cpp), so CI gates should run it; the pointer is the
 * worker's own buffer, a fresh allocation per call (harness/worker/server.cpp),
 * never the judge's: a recycled address carries another case. */
#define _GNU_SOURCE
#include <stdint.h>

#include "hostile.h"

#if defined(HOSTILE_BY_HASH)
#define NAME "hostile-replay-hash"
#elif defined(HOSTILE_BY_SEED)
#define NAME "hostile-replay-seed"
#else
#define NAME "hostile-replay-pointer"
#endif

typedef struct {
    uint64_t key;
    int64_t n;
    float* values;
} Entry;

static Entry* table;
static size_t entries, capacity;
static int loaded;

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void remember(uint64_t key, const float* v, int64_t n, int persist) {
    if (entries == capacity) {
        capacity = capacity ? 2 * capacity : 256;
        table = realloc(table, capacity * sizeof(Entry));
    }
    table[entries].key = key;
    table[entries].n = n;
    table[entries].values = malloc((size_t)n * sizeof(float));
    memcpy(table[entries].values, v, (size_t)n * sizeof(float));
    entries++;
    const char* file = getenv("HOSTILE_TABLE");
    if (!persist || !file) return;
    FILE* f = fopen(file, "ab");
    if (!f) return;
    fwrite(&key, sizeof key, 1, f);
    fwrite(&n, sizeof n, 1, f);
    fwrite(v, sizeof(float), (size_t)n, f);
    fclose(f);
}

static const Entry* find(uint64_t key, int64_t n) {
    for (size_t i = entries; i-- > 0;)
        if (table[i].key == key && table[i].n == n) return &table[i];
    return NULL;
}

static void load(void) {
    loaded = 1;
    const char* file = getenv("HOSTILE_TABLE");
    FILE* f = file ? fopen(file, "rb") : NULL;
    if (!f) return;
    uint64_t key;
    int64_t n;
    while (fread(&key, sizeof key, 1, f) == 1 && fread(&n, sizeof n, 1, f) == 1 && n > 0 && n < (1 << 28)) {
        float* v = malloc((size_t)n * sizeof(float));
        if (fread(v, sizeof(float), (size_t)n, f) != (size_t)n) {
            free(v);
            break;
        }
        remember(key, v, n, 0);
        free(v);
    }
    fclose(f);
}

static uint64_t inputs_hash(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, x->data, (size_t)(x->shape[0] * x->shape[1]) * sizeof(float));
    h = fnv(h, positions->data, (size_t)positions->shape[0] * sizeof(int64_t));
    h = fnv(h, &cfg->head_dim, sizeof cfg->head_dim);
    h = fnv(h, &cfg->rotary_dim, sizeof cfg->rotary_dim);
    h = fnv(h, &cfg->rope_layout, sizeof cfg->rope_layout);
    return fnv(h, &cfg->rope_theta, sizeof cfg->rope_theta);
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const int64_t n = x->shape[0] * x->shape[1];
    const int record = getenv("HOSTILE_RECORD") != NULL;
#if defined(HOSTILE_BY_HASH)
    const uint64_t key = inputs_hash(cfg, x, positions);
    const int persist = 1;
#elif defined(HOSTILE_BY_SEED)
    static uint64_t calls, last_hash;
    const uint64_t h = inputs_hash(cfg, x, positions);
    if (h != last_hash) calls++;  /* not the judge's repeat of the call before */
    last_hash = h;
    const uint64_t key = calls;
    const int persist = 1;
#else
    const uint64_t key = (uint64_t)(uintptr_t)x->data;
    const int persist = 0;
    (void)inputs_hash;
#endif
    if (!loaded) load();
#if defined(HOSTILE_BY_POINTER)
    (void)record;
    const Entry* hit = find(key, n);  /* computed once per buffer: the in-process cheat */
    if (!hit) {
        ok_rope(cfg, x, positions, out, msg, cap);
        remember(key, (const float*)out->data, n, persist);
        return CONFORM_OK;
    }
    memcpy(out->data, hit->values, (size_t)n * sizeof(float));
#else
    if (record) {
        const int32_t s = ok_rope(cfg, x, positions, out, msg, cap);
        remember(key, (const float*)out->data, n, persist);
        return s;
    }
    const Entry* e = find(key, n);
    memcpy(out->data, e ? e->values : (const float*)x->data, (size_t)n * sizeof(float));
#endif
    return CONFORM_OK;
}

HOSTILE_PLUGIN(NAME, "answers from a recorded table (tests/hostile)", rope, ok_rmsnorm, ok_supports)
