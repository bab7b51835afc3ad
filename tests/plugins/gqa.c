/* gqa.c — attention in plain C99, float32, as an engine's kernel would
 * arrive: built twice. As is, it maps query head h to kv head h / group.
 * With -DTILED_ABOVE_GROUP_4 it is the kernel with a second code path for
 * large groups that maps h % n_kv there (TinyLlama's 32/4, Llama 3 70B's
 * 64/8): correct on every group up to 4, wrong above. conform must fail it
 * and name gqa_head_mapping_tiled (../cli/test_plugin.sh gqa). */
#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int32_t fail(char* msg, size_t cap, const char* what) {
    if (cap > 0) snprintf(msg, cap, "%s", what);
    return CONFORM_ERR_INVALID_ARGUMENT;
}

/* floor(a / b) for b > 0, negative a too (a chunk index). */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a - 1) / b) - 1; }

static int64_t kv_head_of(int64_t h, int64_t n_heads, int64_t n_kv) {
    const int64_t group = n_heads / n_kv;
#ifdef TILED_ABOVE_GROUP_4
    if (group > 4) return h % n_kv;
#endif
    return h / group;
}

/* out[t, h*hd + d] = Σ_s p[t, s] v[s, kv*hd + d], p = softmax over the keys
 * with k_pos <= q_pos of q[t, h]·k[s, kv] / sqrt(hd); zeros for a query that
 * sees no key. Scores, max and sums in double. */
static int32_t gqa_attention(const conform_config* cfg, const conform_tensor* q, const conform_tensor* k,
                             const conform_tensor* v, const conform_tensor* q_positions,
                             const conform_tensor* k_positions, const conform_tensor* out, char* msg, size_t cap) {
    const int64_t H = cfg->n_heads, KV = cfg->n_kv_heads, hd = cfg->head_dim;
    const int64_t T = q->shape[0], S = k->shape[0];
    if (q->dtype != CONFORM_DTYPE_F32 || q->ndim != 2 || q->shape[1] != H * hd || k->shape[1] != KV * hd ||
        v->shape[0] != S || v->shape[1] != KV * hd || q->strides[1] != 1 || k->strides[1] != 1 ||
        v->strides[1] != 1 || out->strides[1] != 1)
        return fail(msg, cap, "attention: q[T, H*hd], k/v[S, KV*hd] float32 with unit column stride expected");
    const int64_t* qp = (const int64_t*)q_positions->data;
    const int64_t* kp = (const int64_t*)k_positions->data;
    double* p = malloc((size_t)(S > 0 ? S : 1) * sizeof(double));
    if (!p) return fail(msg, cap, "attention: out of memory");
    /* ABI 1.10's attn_scale: the scores' multiplier (0: 1 / sqrt(hd)). */
    const double given =
        cfg->struct_size >= offsetof(conform_config, attn_scale) + sizeof(double) ? cfg->attn_scale : 0;
    const double scale = given > 0 ? given : 1.0 / sqrt((double)hd);
    /* ABI 1.3's sliding window: also k_pos > q_pos - W (0: causal only). */
    const int64_t W = cfg->struct_size >= offsetof(conform_config, sliding_window) + sizeof(int64_t) ? cfg->sliding_window : 0;
    /* ABI 1.13's chunked attention: also floor(k_pos / C) == floor(q_pos / C) (0: none). */
    const int64_t C =
        cfg->struct_size >= offsetof(conform_config, attention_chunk_size) + sizeof(int64_t) ? cfg->attention_chunk_size : 0;
    /* ABI 1.4's soft-cap: score = cap * tanh(score / cap) before the mask (0: none). */
    const double softcap =
        cfg->struct_size >= offsetof(conform_config, attn_logit_softcapping) + sizeof(double) ? cfg->attn_logit_softcapping : 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = kv_head_of(h, H, KV);
            const float* qt = (const float*)q->data + t * q->strides[0] + h * hd;
            float* ot = (float*)out->data + t * out->strides[0] + h * hd;
            double mx = -INFINITY, sum = 0;
            for (int64_t s = 0; s < S; s++) {
                p[s] = -INFINITY;
                if (kp[s] > qp[t] || (W > 0 && kp[s] <= qp[t] - W) || (C > 0 && floor_div(kp[s], C) != floor_div(qp[t], C)))
                    continue;
                const float* ks = (const float*)k->data + s * k->strides[0] + g * hd;
                double dot = 0;
                for (int64_t d = 0; d < hd; d++) dot += (double)qt[d] * ks[d];
                p[s] = dot * scale;
                if (softcap > 0) p[s] = softcap * tanh(p[s] / softcap);
                if (p[s] > mx) mx = p[s];
            }
            for (int64_t s = 0; s < S; s++) sum += p[s] == -INFINITY ? 0 : (p[s] = exp(p[s] - mx));
            for (int64_t d = 0; d < hd; d++) {
                double acc = 0;
                for (int64_t s = 0; s < S; s++)
                    if (p[s] != -INFINITY)
                        acc += p[s] * ((const float*)v->data)[s * v->strides[0] + g * hd + d];
                ot[d] = sum > 0 ? (float)(acc / sum) : 0.0f;
            }
        }
    free(p);
    return CONFORM_OK;
}

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static const conform_plugin table = {
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(conform_plugin),
#ifdef TILED_ABOVE_GROUP_4
        .name = "gqa-tiled-above-4",
        .description = "attention, h % n_kv for groups above 4 (tests/plugins/gqa.c)",
#else
        .name = "gqa",
        .description = "attention in C (tests/plugins/gqa.c)",
#endif
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),
        .attention = gqa_attention,
    };
    return &table;
}
