/* noop.c — a plugin that does no work: every op copies its first input
 * (x, or q for attention) to its output. Wrong on purpose (bench says it
 * disagrees with torch, the gate fails it); what it is for is the cost of
 * the worker round trip itself: `conform bench --impl-lib libnoop_plugin.so`
 * times a call whose kernel is one memcpy, so the time is the pipes, the
 * copies and the checks (BENCHMARKS.md, "Isolation and workers"). */
#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The minor version the table claims: 1.13, or the environment's
 * NOOP_ABI_MINOR (0 to 13), so that one build stands for a plugin built
 * against any 1.x (cli/test_plugin.sh contract: each minor is offered the
 * twists it had fields for, and no other). */
#include <stdlib.h>

static int32_t copy(const conform_tensor* from, const conform_tensor* out) {
    memcpy(out->data, from->data, (size_t)(out->shape[0] * out->shape[1]) * sizeof(float));
    return CONFORM_OK;
}

static int32_t noop_rmsnorm(const conform_config* c, const conform_tensor* x, const conform_tensor* w,
                            const conform_tensor* out, char* m, size_t n) {
    (void)c, (void)w, (void)m, (void)n;
    return copy(x, out);
}
static int32_t noop_rope(const conform_config* c, const conform_tensor* x, const conform_tensor* p,
                         const conform_tensor* out, char* m, size_t n) {
    (void)c, (void)p, (void)m, (void)n;
    return copy(x, out);
}
static int32_t noop_attention(const conform_config* c, const conform_tensor* q, const conform_tensor* k,
                              const conform_tensor* v, const conform_tensor* qp, const conform_tensor* kp,
                              const conform_tensor* out, char* m, size_t n) {
    (void)c, (void)k, (void)v, (void)qp, (void)kp, (void)m, (void)n;
    return copy(q, out);
}
static int32_t noop_swiglu(const conform_config* c, const conform_tensor* x, const conform_tensor* w1,
                           const conform_tensor* w3, const conform_tensor* w2, const conform_tensor* out, char* m,
                           size_t n) {
    (void)c, (void)w1, (void)w3, (void)w2, (void)m, (void)n;
    return copy(x, out);
}
static int32_t noop_block(const conform_config* c, const conform_tensor* x, const conform_block_weights* w,
                          const conform_tensor* p, const conform_tensor* taps, uint32_t* written, char* m, size_t n) {
    (void)c, (void)w, (void)p, (void)m, (void)n;
    *written = 1u << CONFORM_TAP_OUT;
    return copy(x, &taps[CONFORM_TAP_OUT]);
}

/* decode copies x too. With an FP8 cache (ABI 1.8) it first checks that the
 * scales arrived as plugin.h says, 1 or n_kv_heads of each: a kernel needs
 * them, and a case that reaches a table without them is the harness's bug. */
static int32_t noop_decode(const conform_config* c, const conform_tensor* x, const conform_block_weights* w,
                           const conform_tensor* p, int64_t prefill, const conform_tensor* out, char* m, size_t n) {
    (void)w, (void)p, (void)prefill;
    if (c->struct_size >= sizeof(conform_config) && c->kv_cache_dtype != CONFORM_KV_CACHE_NONE) {
        const conform_tensor* s[2] = {&c->k_scale, &c->v_scale};
        for (int i = 0; i < 2; ++i) {
            const int64_t len = s[i]->ndim == 1 ? s[i]->shape[0] : -1;
            if (s[i]->data == NULL || (len != 1 && len != c->n_kv_heads)) {
                snprintf(m, n, "decode: an FP8 cache without its %s (1 or n_kv_heads values)", i ? "v_scale" : "k_scale");
                return CONFORM_ERR_INVALID_ARGUMENT;
            }
        }
    }
    return copy(x, out);
}

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static conform_plugin table = {
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(conform_plugin),
        .name = "noop",
        .description = "copies its input to its output: the cost of a worker round trip (tests/plugins/noop.c)",
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),
        .rmsnorm = noop_rmsnorm,
        .rope = noop_rope,
        .qk_norm = noop_rmsnorm,
        .attention = noop_attention,
        .swiglu = noop_swiglu,
        .block = noop_block,
        .decode = noop_decode,
        .abi_minor = CONFORM_PLUGIN_ABI_MINOR,
    };
    const char* minor = getenv("NOOP_ABI_MINOR");
    if (minor && *minor) {
        table.abi_minor = (uint32_t)atoi(minor);
        /* A 1.0 table ends before abi_minor; a 1.1 one before paged_attention. */
        if (table.abi_minor == 0) table.struct_size = (uint32_t)offsetof(conform_plugin, abi_minor);
    }
    return &table;
}
