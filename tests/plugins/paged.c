/* An engine's paged decode/prefill kernel as a plugin (ABI 1.2): FlashInfer's
 * layout, int32 index arrays, float32, one query row and head at a time with
 * an online softmax. Built twice: as it should be, and (PAGED_LAST_PAGE_BUG)
 * reading every last page whole, as a kernel that ignores kv_last_page_len
 * does (test_paged.sh). Only the C header, as out of tree. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conform/plugin_v1.h"  /* built against ABI 1.x, which keeps loading */

/* ABI 1.6's FP8 cache: x as the cache stores it, fp8(x) back in float —
 * round to nearest even (nearbyintf), saturating at the format's max. */
static float fp8_round(float x, uint32_t kind) {
    const int M = kind == CONFORM_KV_CACHE_FP8_E5M2 ? 2 : 3, emin = kind == CONFORM_KV_CACHE_FP8_E5M2 ? -14 : -6;
    const float top = kind == CONFORM_KV_CACHE_FP8_E5M2 ? 57344.0f : 448.0f;
    const float a = fabsf(x);
    if (isnan(x) || a == 0.0f) return x;
    int e;
    frexpf(a, &e); /* a = m 2^e, 0.5 <= m < 1 */
    const float quantum = ldexpf(1.0f, (e - 1 < emin ? emin : e - 1) - M);
    float r = nearbyintf(a / quantum) * quantum;
    if (r > top) r = top;
    return x < 0 ? -r : r;
}

static int32_t paged_attention(const conform_config* cfg, const conform_tensor* q, const conform_tensor* k_cache,
                               const conform_tensor* v_cache, const conform_tensor* qo_indptr,
                               const conform_tensor* kv_indptr, const conform_tensor* kv_indices,
                               const conform_tensor* kv_last_page_len, const conform_tensor* out,
                               const conform_tensor* lse, char* msg, size_t msg_cap) {
    if (cfg->struct_size < offsetof(conform_config, page_size) + sizeof(int64_t) || qo_indptr->dtype != CONFORM_DTYPE_I32) {
        snprintf(msg, msg_cap, "needs ABI 1.2's page_size and int32 index arrays");
        return CONFORM_ERR_INVALID_ARGUMENT;
    }
    const int64_t H = cfg->n_heads, KV = cfg->n_kv_heads, hd = cfg->head_dim, P = cfg->page_size;
    const int64_t B = kv_last_page_len->shape[0], group = H / KV;
    const int32_t* qo = (const int32_t*)qo_indptr->data;
    const int32_t* kvp = (const int32_t*)kv_indptr->data;
    const int32_t* ids = (const int32_t*)kv_indices->data;
    const int32_t* last = (const int32_t*)kv_last_page_len->data;
    const float* Q = (const float*)q->data;
    const float* K = (const float*)k_cache->data;
    const float* V = (const float*)v_cache->data;
    float* O = (float*)out->data;
    float* L = (float*)lse->data;
    /* ABI 1.10's attn_scale: the scores' multiplier (0: 1 / sqrt(hd)). */
    const double given = cfg->struct_size >= offsetof(conform_config, attn_scale) + sizeof(double) ? cfg->attn_scale : 0;
    const float scale = given > 0 ? (float)given : 1.0f / sqrtf((float)hd);
    /* ABI 1.3's sliding window: a row at pos sees keys pos - W + 1 ..= pos (0: all up to pos). */
    const int64_t W = cfg->struct_size >= offsetof(conform_config, sliding_window) + sizeof(int64_t) ? cfg->sliding_window : 0;
    /* ABI 1.13's chunked attention: a row at pos sees keys from (pos / C) * C on only (0: none). */
    const int64_t C =
        cfg->struct_size >= offsetof(conform_config, attention_chunk_size) + sizeof(int64_t) ? cfg->attention_chunk_size : 0;
    /* ABI 1.4's sinks (gpt-oss): head h's logit in each row's denominator, no value (NULL: none). */
    const float* sinks =
        cfg->struct_size >= offsetof(conform_config, sinks) + sizeof(conform_tensor) ? (const float*)cfg->sinks.data : NULL;
    /* ABI 1.6's FP8 cache: each value read as fp8(x / scale) * scale, its kv head's scale (or the one). */
    const int fp8 = cfg->struct_size >= offsetof(conform_config, v_scale) + sizeof(conform_tensor) &&
                    cfg->kv_cache_dtype != CONFORM_KV_CACHE_NONE;
    const float* ks = fp8 ? (const float*)cfg->k_scale.data : NULL;
    const float* vs = fp8 ? (const float*)cfg->v_scale.data : NULL;
    const int per_head = fp8 && cfg->k_scale.shape[0] > 1;
    if (fp8 && hd > 512) {
        snprintf(msg, msg_cap, "an FP8 cache with head_dim %lld: this kernel reads heads of 512 at most", (long long)hd);
        return CONFORM_ERR_INVALID_ARGUMENT;
    }
    /* ABI 1.4's soft-cap: score = cap * tanh(score / cap) before the softmax (0: none). */
    const float cap = cfg->struct_size >= offsetof(conform_config, attn_logit_softcapping) + sizeof(double)
                          ? (float)cfg->attn_logit_softcapping
                          : 0.0f;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t n = kvp[b + 1] - kvp[b], q_len = qo[b + 1] - qo[b];
#ifdef PAGED_LAST_PAGE_BUG
        const int64_t kv_len = n * P; /* the bug: every last page read whole */
        (void)last;
#else
        const int64_t kv_len = n == 0 ? 0 : (n - 1) * P + last[b];
#endif
        for (int64_t j = 0; j < q_len; ++j) {
            const int64_t t = qo[b] + j, pos = kv_len - q_len + j;
            for (int64_t h = 0; h < H; ++h) {
                const float* qh = Q + t * q->strides[0] + h * hd;
                float* oh = O + t * out->strides[0] + h * hd;
                /* a sink is the online softmax's state before the first key (m = sink, l = 1);
                 * a sequence with no key keeps out 0, lse -inf */
                float m = sinks && kv_len > 0 ? sinks[h] : -INFINITY, l = sinks && kv_len > 0 ? 1.0f : 0.0f;
                for (int64_t d = 0; d < hd; ++d) oh[d] = 0.0f;
                int64_t first = W > 0 && pos - W + 1 > 0 ? pos - W + 1 : 0;
                if (C > 0 && (pos / C) * C > first) first = (pos / C) * C;
                for (int64_t i = first; i <= pos && i < kv_len; ++i) {
                    const int64_t row = (int64_t)ids[kvp[b] + i / P] * P + i % P;
                    const float* k0 = K + row * k_cache->strides[0] + (h / group) * hd;
                    const float* v0 = V + row * v_cache->strides[0] + (h / group) * hd;
                    float kb[512], vb[512]; /* head_dim <= 512: the cache written, then read */
                    const float* ki = k0;
                    const float* vi = v0;
                    if (fp8) {
                        const float sk = ks[per_head ? h / group : 0], sv = vs[per_head ? h / group : 0];
                        for (int64_t d = 0; d < hd; ++d) {
                            kb[d] = fp8_round(k0[d] / sk, cfg->kv_cache_dtype) * sk;
                            vb[d] = fp8_round(v0[d] / sv, cfg->kv_cache_dtype) * sv;
                        }
                        ki = kb;
                        vi = vb;
                    }
                    float s = 0.0f;
                    for (int64_t d = 0; d < hd; ++d) s += qh[d] * ki[d];
                    s *= scale;
                    if (cap > 0.0f) s = cap * tanhf(s / cap);
                    /* online softmax: rescale what was summed under the old max */
                    const float m_new = s > m ? s : m, c = expf(m - m_new), p = expf(s - m_new);
                    l = l * c + p;
                    for (int64_t d = 0; d < hd; ++d) oh[d] = oh[d] * c + p * vi[d];
                    m = m_new;
                }
                if (l > 0.0f) {
                    for (int64_t d = 0; d < hd; ++d) oh[d] /= l;
                    L[t * lse->strides[0] + h] = m + logf(l);
                } else {
                    L[t * lse->strides[0] + h] = -INFINITY; /* no key: out 0, lse -inf */
                }
            }
        }
    }
    return CONFORM_OK;
}

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static conform_plugin table;
    memset(&table, 0, sizeof table);
    table.abi_version = CONFORM_PLUGIN_ABI_VERSION;
    table.struct_size = sizeof table;
#ifdef PAGED_LAST_PAGE_BUG
    table.name = "paged_c_whole_last_page";
    table.description = "a paged kernel that reads every last page whole";
#else
    table.name = "paged_c";
    table.description = "a paged decode/prefill kernel in C, FlashInfer's layout";
#endif
    table.dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32);
    table.abi_minor = CONFORM_PLUGIN_ABI_MINOR;
    table.paged_attention = paged_attention;
    return &table;
}
