/* conform/plugin_v1.h — the plugin C ABI version 1 (1.0 to 1.13), frozen.
 *
 * A plugin built against it keeps loading: conform reads its table's
 * abi_minor and offers it the twists that minor had fields for (1.1: RoPE
 * scaling and partial rotary; 1.3: qkv_bias and the sliding window; ... 1.13:
 * the attention chunk), and no case with any other twist on. New plugins
 * build against conform/plugin.h (ABI 2), where twists travel by name and
 * the table lists the ones it computes; nothing is added here any more.
 *
 * Included alone (an ABI 1 plugin's source), it defines the ABI 1 types under
 * their names (conform_config, conform_block_weights, conform_plugin) and
 * CONFORM_PLUGIN_ABI_VERSION 1; included after conform/plugin.h (conform's
 * own adapter), under conform_v1_config, conform_v1_block_weights,
 * conform_v1_plugin. The layout is 1.13's, byte for byte.
 */
#ifndef CONFORM_PLUGIN_V1_H
#define CONFORM_PLUGIN_V1_H

#include "conform/plugin_types.h"

#ifdef CONFORM_PLUGIN_H
#define CONFORM_V1(name) conform_v1_##name
#else
#define CONFORM_V1(name) conform_##name
#define CONFORM_PLUGIN_ABI_VERSION 1u
#define CONFORM_PLUGIN_ABI_MINOR 13u
#endif
#define CONFORM_PLUGIN_V1_LAST_MINOR 13u
/* Minor versions only appended fields. 1.1: the config's RoPE scaling and
 * rotary_dim, and the table's abi_minor. 1.2: paged_attention (the table's
 * function, the config's page_size, int32 index tensors). 1.3: Qwen2's
 * projection biases (the config's qkv_bias, the block weights' bq, bk, bv)
 * and sliding-window attention (the config's sliding_window). 1.4: logit
 * soft-capping and attention sinks (the config's attn_logit_softcapping and
 * sinks). 1.5: Gemma's (1 + w) RMSNorm (the config's norm_plus_one). 1.6:
 * an FP8 KV cache for paged_attention (the config's kv_cache_dtype, k_scale,
 * v_scale). 1.7: the table's activation_quant (what the plugin does to the
 * activations of its weight products). 1.8: the FP8 KV cache for decode too
 * (the same config fields; no new one). 1.9: Gemma's GeGLU (the config's
 * hidden_act). 1.10: a score scale other than 1 / sqrt(head_dim) (the
 * config's attn_scale). 1.11: Gemma 2/3's sandwich norms (the config's
 * sandwich_norm, the block weights' attn_post_norm and ffn_post_norm). 1.12:
 * a layer without RoPE (the config's nope). 1.13: chunked attention (the
 * config's attention_chunk_size). */

#ifdef __cplusplus
extern "C" {
#endif


/* An FP8 KV cache (ABI 1.6; OCP formats: E4M3FN, max 448, no inf; E5M2, max
 * 57344). k_cache and v_cache hold K and V as the engine writes them; the
 * plugin writes its cache, code = fp8(x / scale) — the division in float32,
 * round to nearest even, saturating at the max (CUDA's __NV_SATFINITE) — and
 * attends over code * scale. */
enum { CONFORM_KV_CACHE_NONE = 0, CONFORM_KV_CACHE_FP8_E4M3 = 1, CONFORM_KV_CACHE_FP8_E5M2 = 2 };

/* The FFN gate's activation (1.9; the config's hidden_act): silu, or
 * F.gelu(a, approximate="tanh") = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))). */
enum { CONFORM_HIDDEN_ACT_SILU = 0, CONFORM_HIDDEN_ACT_GELU_TANH = 1 };



/* The block's configuration and every op's parameters in one struct. Each op
 * reads only the fields listed for it; the others are 0.
 *   rmsnorm:   norm_eps                         (y = x * rsqrt(mean(x^2) + eps) * w)
 *   rope:      head_dim, n_heads, rope_layout, rope_theta, and (1.1) rotary_dim, rope_scaling and its parameters
 *              (inv_freq[i] = theta^(-2i/head_dim), angle = pos * inv_freq[i])
 *   qk_norm:   head_dim, n_heads, norm_eps      (rmsnorm over each head's slice)
 *   attention: n_heads, n_kv_heads, head_dim    (causal by position, scale 1/sqrt(hd);
 *              query head h reads kv head h / (n_heads / n_kv_heads))
 *   swiglu:    d_model, ffn_dim                 ((silu(x@w1) * (x@w3)) @ w2; 1.9: act per hidden_act)
 *   block, decode: all of them but page_size (and, 1.3, qkv_bias).
 *   paged_attention (1.2): n_heads, n_kv_heads, head_dim, page_size
 *   (1.3) attention, paged_attention, block, decode also sliding_window
 *   (1.4) and attn_logit_softcapping, sinks
 *   (1.5) rmsnorm, qk_norm, block, decode also norm_plus_one
 *   (1.6) paged_attention also kv_cache_dtype, k_scale, v_scale
 *   (1.8) decode also kv_cache_dtype, k_scale, v_scale: every key and value it
 *         caches (the prefill's too) is stored as fp8(k_rot / k_scale), the
 *         division in float32, round to nearest even, saturating, and read
 *         back as code * k_scale; likewise v
 *   (1.9) swiglu, block, decode also hidden_act
 *   (1.10) attention, paged_attention, block, decode also attn_scale */
typedef struct CONFORM_V1(config) {
    uint32_t struct_size; /* sizeof(conform_config) as conform built it */
    uint32_t dtype;       /* CONFORM_DTYPE_* every float tensor of the call has */
    int64_t d_model;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t ffn_dim;
    uint32_t rope_layout; /* CONFORM_ROPE_* */
    uint32_t qk_norm;     /* 1: Qwen3 per-head RMSNorm on q and k before RoPE */
    double rope_theta;
    double norm_eps;
    /* ---- ABI 1.1 (read them only when struct_size covers them; conform
     * offers scaled or partial-rotary cases only to a plugin whose table
     * says abi_minor >= 1) ---- */
    int64_t rotary_dim;     /* dims of each head RoPE rotates (the first ones; = head_dim unless partial) */
    uint32_t rope_scaling;  /* CONFORM_ROPE_SCALING_* */
    uint32_t reserved11;
    double rope_factor;                  /* LINEAR, LLAMA3, YARN, DYNAMIC */
    double rope_low_freq_factor;         /* LLAMA3 */
    double rope_high_freq_factor;        /* LLAMA3 */
    int64_t rope_original_max_position;  /* LLAMA3, YARN, DYNAMIC */
    double rope_beta_fast;               /* YARN */
    double rope_beta_slow;               /* YARN */
    double rope_attention_factor;        /* YARN: multiplies cos and sin (1 otherwise) */
    /* ---- ABI 1.2 ---- */
    int64_t page_size; /* paged_attention: slots per page of the KV cache (P) */
    /* ---- ABI 1.3 (conform offers a case with qkv_bias = 1 or a sliding
     * window only to a plugin whose table says abi_minor >= 3; for an older
     * one they are reported unsupported) ---- */
    uint32_t qkv_bias; /* 1: q = x @ wq + bq, k = x @ wk + bk, v = x @ wv + bv (Qwen2), before QK-norm and RoPE */
    uint32_t reserved13;
    int64_t sliding_window; /* attention, paged_attention, block, decode: W > 0: key j visible to query i iff
                             * q_pos[i] - W < k_pos[j] <= q_pos[i] (W keys, the query's own included: HF's
                             * sliding_window, llama.cpp's n_swa; FlashAttention's left = W - 1); 0: causal */
    /* ---- ABI 1.4 (a soft-capped case, or one with sinks, is offered only to a
     * plugin whose table says abi_minor >= 4) ---- */
    double attn_logit_softcapping; /* attention, paged_attention, block, decode: cap > 0: each score
                                    * s = q.k / sqrt(hd) becomes cap * tanh(s / cap) before the mask
                                    * (Gemma 2); 0: none */
    conform_tensor sinks; /* attention, paged_attention, block, decode: data != NULL iff the model has
                           * attention sinks (gpt-oss): [n_heads] in the call's dtype, head h's logit
                           * joins each of its rows' softmax denominators with no value; never capped;
                           * paged_attention's lse counts it (a row that sees no key: out 0, lse -inf) */
    /* ---- ABI 1.5 (a case with Gemma's norms is offered only to a plugin
     * whose table says abi_minor >= 5) ---- */
    uint32_t norm_plus_one; /* rmsnorm, qk_norm, block, decode: 1: every RMSNorm scales by (1 + w), not w
                             * (Gemma: the weight is stored as its offset from one; 1 + w taken in float32) */
    uint32_t reserved15;
    /* ---- ABI 1.6 (a case with an FP8 KV cache is offered only to a plugin
     * whose table says abi_minor >= 6) ---- */
    uint32_t kv_cache_dtype; /* paged_attention, and (1.8) decode: CONFORM_KV_CACHE_* */
    uint32_t reserved16;
    conform_tensor k_scale;  /* paged_attention (decode, 1.8), with an FP8 cache: [1] (per tensor) or [n_kv_heads] (kv head g's
                              * columns g*hd .. g*hd + hd - 1 use k_scale[g]), in the call's dtype; else data NULL */
    conform_tensor v_scale;  /* likewise, for v */
    /* ---- ABI 1.9 (a GeGLU case is offered only to a plugin whose table says
     * abi_minor >= 9) ---- */
    uint32_t hidden_act; /* swiglu, block, decode: CONFORM_HIDDEN_ACT_*: the FFN gate's activation */
    uint32_t reserved19;
    /* ---- ABI 1.10 (a case with attn_scale > 0 is offered only to a plugin
     * whose table says abi_minor >= 10) ---- */
    double attn_scale; /* attention, paged_attention, block, decode: > 0: scores are (q.k) * attn_scale (Gemma 2/3's
                        * query_pre_attn_scalar^-1/2); 0: (q.k) / sqrt(head_dim) */
    /* ---- ABI 1.11 (a case with sandwich norms is offered only to a plugin
     * whose table says abi_minor >= 11) ---- */
    uint32_t sandwich_norm; /* block, decode: 1: h = x + rmsnorm(attn @ wo, attn_post_norm), out = h +
                             * rmsnorm(ffn_out, ffn_post_norm) (Gemma 2/3; (1 + w) under norm_plus_one) */
    uint32_t reserved111;
    /* ---- ABI 1.12 (a NoPE case is offered only to a plugin whose table
     * says abi_minor >= 12) ---- */
    uint32_t nope; /* block, decode: 1: q and k are not rotated (q_rot = q, k_rot = k after any QK-norm): a NoPE
                    * layer (SmolLM3's every 4th, Llama 4's no_rope_layers); attention stays causal by position */
    uint32_t reserved112;
    /* ---- ABI 1.13 (a chunked case is offered only to a plugin whose table
     * says abi_minor >= 13) ---- */
    int64_t attention_chunk_size; /* attention, paged_attention, block, decode: C > 0: key j visible to query i iff
                                   * also floor(k_pos / C) == floor(q_pos / C) (Llama 4's chunked attention; not a
                                   * sliding window of C); 0: none */
} CONFORM_V1(config);

/* The block's weights, stored [in, out]; q_norm / k_norm have data != NULL
 * iff config->qk_norm; bq / bk / bv (1.3) iff config->qkv_bias;
 * attn_post_norm / ffn_post_norm (1.11) iff config->sandwich_norm. */
typedef struct CONFORM_V1(block_weights) {
    uint32_t struct_size;
    uint32_t reserved;
    conform_tensor attn_norm; /* [D] */
    conform_tensor wq;        /* [D, H*hd] */
    conform_tensor wk;        /* [D, KV*hd] */
    conform_tensor wv;        /* [D, KV*hd] */
    conform_tensor wo;        /* [H*hd, D] */
    conform_tensor ffn_norm;  /* [D] */
    conform_tensor w1;        /* [D, F] gate */
    conform_tensor w3;        /* [D, F] up */
    conform_tensor w2;        /* [F, D] down */
    conform_tensor q_norm;    /* [hd] */
    conform_tensor k_norm;    /* [hd] */
    /* ---- ABI 1.3 ---- */
    conform_tensor bq;        /* [H*hd] */
    conform_tensor bk;        /* [KV*hd] */
    conform_tensor bv;        /* [KV*hd] */
    /* ---- ABI 1.11 ---- */
    conform_tensor attn_post_norm; /* [D] */
    conform_tensor ffn_post_norm;  /* [D] */
} CONFORM_V1(block_weights);

/* ---- the table a plugin exports -------------------------------------------- */

typedef struct CONFORM_V1(plugin) {
    uint32_t abi_version; /* CONFORM_PLUGIN_ABI_VERSION */
    uint32_t struct_size; /* sizeof(conform_plugin) */
    const char* name;     /* implementation name for --impl: [A-Za-z0-9_.-]+ */
    const char* description;
    uint32_t dtypes;      /* CONFORM_DTYPE_BIT(...) of each dtype it runs in */
    uint32_t reserved;

    /* Optional (NULL: every config of an implemented op is supported).
     * CONFORM_OK to accept a config; CONFORM_ERR_UNSUPPORTED with a reason in
     * msg to have conform skip it rather than fail it. */
    int32_t (*supports)(uint32_t op, const CONFORM_V1(config)* cfg, char* msg, size_t msg_cap);

    /* out[T, D] = x * rsqrt(mean(x^2, -1) + eps) * weight       x[T, D], weight[D] */
    int32_t (*rmsnorm)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, n*hd] = x with each head rotated by its row's position   x[T, n*hd], positions[T] */
    int32_t (*rope)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, n*hd] = rmsnorm of each head's hd slice with weight[hd] */
    int32_t (*qk_norm)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, H*hd] = softmax(q k^T / sqrt(hd), keys with k_pos <= q_pos) v
     * q[T, H*hd], k/v[S, KV*hd], q_positions[T], k_positions[S]; a query that
     * sees no key gets zeros. */
    int32_t (*attention)(const CONFORM_V1(config)* cfg, const conform_tensor* q, const conform_tensor* k,
                         const conform_tensor* v, const conform_tensor* q_positions,
                         const conform_tensor* k_positions, const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, D] = (silu(x @ w1) * (x @ w3)) @ w2    x[T, D], w1/w3[D, F], w2[F, D] */
    int32_t (*swiglu)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const conform_tensor* w1,
                      const conform_tensor* w3, const conform_tensor* w2, const conform_tensor* out, char* msg,
                      size_t msg_cap);

    /* One forward over T tokens. taps[CONFORM_TAP_COUNT]: taps[CONFORM_TAP_OUT]
     * is always there; another tap is requested iff its data != NULL, and an
     * unrequested one must not be written. Set *taps_written to the bits
     * (1u << CONFORM_TAP_*) of the taps written; those are compared too. */
    int32_t (*block)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const CONFORM_V1(block_weights)* w,
                     const conform_tensor* positions, const conform_tensor* taps, uint32_t* taps_written, char* msg,
                     size_t msg_cap);

    /* The first `prefill` tokens in one forward, then the rest one at a time
     * through a KV cache; out[T, D] must equal block's out over all T. */
    int32_t (*decode)(const CONFORM_V1(config)* cfg, const conform_tensor* x, const CONFORM_V1(block_weights)* w,
                      const conform_tensor* positions, int64_t prefill, const conform_tensor* out, char* msg,
                      size_t msg_cap);

    /* ---- ABI 1.1 ---- */
    uint32_t abi_minor; /* CONFORM_PLUGIN_ABI_MINOR it was built against; a 1.0 table ends before it */
    uint32_t reserved11;

    /* ---- ABI 1.2 (a table built against 1.0 or 1.1 ends before it: conform
     * then offers it no paged_attention case, and reports them not run) ----
     * A batch of B sequences over a paged KV cache, FlashInfer's layout
     * (fixtures/SCHEMA.md, "paged_attention's batch"; impls/PLUGINS.md):
     *   q[T, H*hd]                  every sequence's new queries, ragged, in batch order
     *   k_cache, v_cache[pages*P, KV*hd]   page p is rows p*P .. p*P + P - 1, P = cfg->page_size;
     *                               rows no sequence owns hold NaN and must not be read
     *   qo_indptr[B+1], kv_indptr[B+1], kv_indices[kv_indptr[B]], kv_last_page_len[B]: int32
     *                               (sequence b: queries qo_indptr[b] ..; pages kv_indices[kv_indptr[b] ..];
     *                               keys (n_b - 1) * P + kv_last_page_len[b], or 0 without pages)
     *   out[T, H*hd], lse[T, H]     per sequence, causal bottom-right (its queries are its last
     *                               tokens); lse the natural log of each row's softmax denominator.
     *                               A row that sees no key: out 0, lse -inf. lse has the run's dtype. */
    int32_t (*paged_attention)(const CONFORM_V1(config)* cfg, const conform_tensor* q, const conform_tensor* k_cache,
                               const conform_tensor* v_cache, const conform_tensor* qo_indptr,
                               const conform_tensor* kv_indptr, const conform_tensor* kv_indices,
                               const conform_tensor* kv_last_page_len, const conform_tensor* out,
                               const conform_tensor* lse, char* msg, size_t msg_cap);

    /* ---- ABI 1.7 (a table built before it ends before it: it declares
     * nothing) ----
     * Optional (NULL: CONFORM_ACT_QUANT_NONE for every op). What the plugin
     * does to the activations of every weight product of `op` (a
     * CONFORM_OP_*) before it: a CONFORM_ACT_QUANT_*. Asked once per op it
     * implements when it is loaded; only swiglu, block and decode have
     * weight products, and any other answer there is a load error. */
    uint32_t (*activation_quant)(uint32_t op);
} CONFORM_V1(plugin);

typedef const CONFORM_V1(plugin) * (*CONFORM_V1(plugin_get_fn))(void);
#ifndef CONFORM_PLUGIN_H
CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void);
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFORM_PLUGIN_V1_H */
