/* conform/plugin.h — the C ABI for implementations that live outside this
 * repository (an engine's own kernels, in its own build).
 *
 * Plain C99, also valid C++: no C++ types cross the boundary, every field has
 * an explicit size, every enum travels as a uint32_t. A plugin is a shared
 * library exporting one symbol,
 *
 *     CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void);
 *
 * which returns a table (static storage; conform never frees it) naming the
 * implementation, the ABI version it was built against, the dtypes it runs in
 * and one function per op; a NULL function is an op it does not implement.
 * `conform --impl-lib libfoo.so` loads it and runs it like an in-repo
 * implementation. impls/PLUGINS.md has the walkthrough and a complete example.
 *
 * Versioning. CONFORM_PLUGIN_ABI_VERSION changes when a layout or a meaning
 * changes; conform refuses a plugin built against another version (exit 2).
 * Fields are only ever appended within a version, and every struct that
 * crosses the boundary starts with its struct_size, so either side can tell
 * which fields the other one knows about.
 *
 * Conventions, the same as for in-repo implementations:
 *   - every float tensor of a call has the dtype the run uses (--dtype), given
 *     in conform_config.dtype and again in each descriptor; positions are int64;
 *   - activations are 2-D [rows, cols], weights 2-D [in, out] so y = x @ W,
 *     norm weights 1-D [n]; strides are in elements (row-major today, but read
 *     them rather than assume it);
 *   - outputs are written into the caller's buffers of exactly the described
 *     shape: never past them, and every element written. conform poisons them
 *     beforehand and guards them afterwards, so both mistakes are reported;
 *   - inputs are read-only (conform checks);
 *   - a function returns CONFORM_OK, or an error code with a message written
 *     into msg (at most msg_cap bytes including the terminating NUL);
 *   - calls may come from a child process forked for the call (isolation,
 *     the default), so keep no state between calls that a call depends on.
 */
#ifndef CONFORM_PLUGIN_H
#define CONFORM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define CONFORM_PLUGIN_ABI_VERSION 1u
/* Minor versions only append fields. 1.1: the config's RoPE scaling and
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
#define CONFORM_PLUGIN_ABI_MINOR 13u
#define CONFORM_PLUGIN_MAX_DIMS 4

#if defined(_WIN32)
#define CONFORM_PLUGIN_EXPORT __declspec(dllexport)
#else
#define CONFORM_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- enumerations (values are part of the ABI) --------------------------- */

/* Element types. A float tensor's data is float32, or the raw 16 bits of a
 * bfloat16 / IEEE half per element. */
enum {
    CONFORM_DTYPE_F32 = 0,
    CONFORM_DTYPE_BF16 = 1,
    CONFORM_DTYPE_F16 = 2,
    CONFORM_DTYPE_I64 = 3, /* positions only */
    CONFORM_DTYPE_I32 = 4  /* paged_attention's index arrays (ABI 1.2) */
};
#define CONFORM_DTYPE_BIT(d) (1u << (d))

/* Which dimensions RoPE rotates together (the config says; never assume):
 *   NEOX:        pairs (x[i], x[i + hd/2])  HF rotate_half, ggml NEOX
 *   INTERLEAVED: pairs (x[2i], x[2i + 1])   Meta view_as_complex, ggml NORMAL */
enum { CONFORM_ROPE_NEOX = 0, CONFORM_ROPE_INTERLEAVED = 1 };

/* How the rotary frequencies are rescaled for long context (ABI 1.1; the
 * formulas are conform/config.h's, HF transformers' modeling_rope_utils):
 *   NONE:    inv_freq[i] = theta^(-2i / rotary_dim)
 *   LINEAR:  inv_freq / factor
 *   LLAMA3:  long wavelengths / factor, short ones kept, a blend between
 *            (low_freq_factor, high_freq_factor, original_max_position)
 *   YARN:    a ramp between inv_freq and inv_freq / factor (beta_fast,
 *            beta_slow, original_max_position); cos and sin times attention_factor
 *   DYNAMIC: NTK base theta * (factor * L / orig - (factor - 1))^(rd / (rd - 2))
 *            for L = max(positions of the call) + 1 > orig; unscaled inside */
enum {
    CONFORM_ROPE_SCALING_NONE = 0,
    CONFORM_ROPE_SCALING_LINEAR = 1,
    CONFORM_ROPE_SCALING_LLAMA3 = 2,
    CONFORM_ROPE_SCALING_YARN = 3,
    CONFORM_ROPE_SCALING_DYNAMIC = 4
};

/* An FP8 KV cache (ABI 1.6; OCP formats: E4M3FN, max 448, no inf; E5M2, max
 * 57344). k_cache and v_cache hold K and V as the engine writes them; the
 * plugin writes its cache, code = fp8(x / scale) — the division in float32,
 * round to nearest even, saturating at the max (CUDA's __NV_SATFINITE) — and
 * attends over code * scale. */
enum { CONFORM_KV_CACHE_NONE = 0, CONFORM_KV_CACHE_FP8_E4M3 = 1, CONFORM_KV_CACHE_FP8_E5M2 = 2 };

/* The FFN gate's activation (1.9; the config's hidden_act): silu, or
 * F.gelu(a, approximate="tanh") = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))). */
enum { CONFORM_HIDDEN_ACT_SILU = 0, CONFORM_HIDDEN_ACT_GELU_TANH = 1 };

/* What an implementation does to the activations of a weight product
 * (y = x @ W) before it (ABI 1.7; the table's activation_quant): nothing, or
 * ggml's Q8_0 (blocks of 32, f16 scale: quantize_row_q8_0_ref) or Q8_K
 * (blocks of 256, f32 scale: quantize_row_q8_K_ref), each row quantised and
 * dequantised along the reduction; a row that is not whole blocks ends in a
 * shorter block (conform/dtype.h act_quant_row states it exactly). conform's
 * low-precision baselines then quantise the same way. */
enum { CONFORM_ACT_QUANT_NONE = 0, CONFORM_ACT_QUANT_Q8_0 = 1, CONFORM_ACT_QUANT_Q8_K = 2 };

/* The ops, in the order of the function pointers below. */
enum {
    CONFORM_OP_RMSNORM = 0,
    CONFORM_OP_ROPE = 1,
    CONFORM_OP_QK_NORM = 2,
    CONFORM_OP_ATTENTION = 3,
    CONFORM_OP_SWIGLU = 4,
    CONFORM_OP_BLOCK = 5,
    CONFORM_OP_DECODE = 6,
    CONFORM_OP_COUNT = 7, /* the ops of ABI 1.0 and 1.1 */
    CONFORM_OP_PAGED_ATTENTION = 7 /* ABI 1.2 */
};

/* The block's intermediate tensors, in data-flow order (see conform/ops.h). */
enum {
    CONFORM_TAP_ATTN_IN = 0, /* rmsnorm(x, attn_norm)            [T, D]     */
    CONFORM_TAP_Q = 1,       /* attn_in @ wq                      [T, H*hd]  */
    CONFORM_TAP_K = 2,       /* attn_in @ wk                      [T, KV*hd] */
    CONFORM_TAP_V = 3,       /* attn_in @ wv                      [T, KV*hd] */
    CONFORM_TAP_Q_ROT = 4,   /* rope(qk_norm?(q))                 [T, H*hd]  */
    CONFORM_TAP_K_ROT = 5,   /* rope(qk_norm?(k))                 [T, KV*hd] */
    CONFORM_TAP_ATTN = 6,    /* attention(q_rot, k_rot, v)        [T, H*hd]  */
    CONFORM_TAP_H = 7,       /* x + attn @ wo                     [T, D]     */
    CONFORM_TAP_FFN_IN = 8,  /* rmsnorm(h, ffn_norm)              [T, D]     */
    CONFORM_TAP_FFN_OUT = 9, /* swiglu(ffn_in, w1, w3, w2)        [T, D]     */
    CONFORM_TAP_OUT = 10,    /* h + ffn_out                       [T, D]     */
    CONFORM_TAP_COUNT = 11
};

/* Status codes. Anything other than CONFORM_OK fails the case, with the code's
 * name and the message in the report. */
enum {
    CONFORM_OK = 0,
    CONFORM_ERR_UNSUPPORTED = 1,      /* this config or dtype is not implemented */
    CONFORM_ERR_INVALID_ARGUMENT = 2, /* a shape, stride or dtype it did not expect */
    CONFORM_ERR_INTERNAL = 3          /* anything else: allocation, device, ... */
};

/* ---- what a call receives -------------------------------------------------- */

typedef struct conform_tensor {
    void* data;      /* inputs: read-only; outputs: write every element */
    uint32_t dtype;  /* CONFORM_DTYPE_* */
    int32_t ndim;    /* 1 or 2 in ABI 1 */
    int64_t shape[CONFORM_PLUGIN_MAX_DIMS];
    int64_t strides[CONFORM_PLUGIN_MAX_DIMS]; /* in elements, not bytes */
} conform_tensor;

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
typedef struct conform_config {
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
} conform_config;

/* The block's weights, stored [in, out]; q_norm / k_norm have data != NULL
 * iff config->qk_norm; bq / bk / bv (1.3) iff config->qkv_bias;
 * attn_post_norm / ffn_post_norm (1.11) iff config->sandwich_norm. */
typedef struct conform_block_weights {
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
} conform_block_weights;

/* ---- the table a plugin exports -------------------------------------------- */

typedef struct conform_plugin {
    uint32_t abi_version; /* CONFORM_PLUGIN_ABI_VERSION */
    uint32_t struct_size; /* sizeof(conform_plugin) */
    const char* name;     /* implementation name for --impl: [A-Za-z0-9_.-]+ */
    const char* description;
    uint32_t dtypes;      /* CONFORM_DTYPE_BIT(...) of each dtype it runs in */
    uint32_t reserved;

    /* Optional (NULL: every config of an implemented op is supported).
     * CONFORM_OK to accept a config; CONFORM_ERR_UNSUPPORTED with a reason in
     * msg to have conform skip it rather than fail it. */
    int32_t (*supports)(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap);

    /* out[T, D] = x * rsqrt(mean(x^2, -1) + eps) * weight       x[T, D], weight[D] */
    int32_t (*rmsnorm)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, n*hd] = x with each head rotated by its row's position   x[T, n*hd], positions[T] */
    int32_t (*rope)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, n*hd] = rmsnorm of each head's hd slice with weight[hd] */
    int32_t (*qk_norm)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                       const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, H*hd] = softmax(q k^T / sqrt(hd), keys with k_pos <= q_pos) v
     * q[T, H*hd], k/v[S, KV*hd], q_positions[T], k_positions[S]; a query that
     * sees no key gets zeros. */
    int32_t (*attention)(const conform_config* cfg, const conform_tensor* q, const conform_tensor* k,
                         const conform_tensor* v, const conform_tensor* q_positions,
                         const conform_tensor* k_positions, const conform_tensor* out, char* msg, size_t msg_cap);

    /* out[T, D] = (silu(x @ w1) * (x @ w3)) @ w2    x[T, D], w1/w3[D, F], w2[F, D] */
    int32_t (*swiglu)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* w1,
                      const conform_tensor* w3, const conform_tensor* w2, const conform_tensor* out, char* msg,
                      size_t msg_cap);

    /* One forward over T tokens. taps[CONFORM_TAP_COUNT]: taps[CONFORM_TAP_OUT]
     * is always there; another tap is requested iff its data != NULL, and an
     * unrequested one must not be written. Set *taps_written to the bits
     * (1u << CONFORM_TAP_*) of the taps written; those are compared too. */
    int32_t (*block)(const conform_config* cfg, const conform_tensor* x, const conform_block_weights* w,
                     const conform_tensor* positions, const conform_tensor* taps, uint32_t* taps_written, char* msg,
                     size_t msg_cap);

    /* The first `prefill` tokens in one forward, then the rest one at a time
     * through a KV cache; out[T, D] must equal block's out over all T. */
    int32_t (*decode)(const conform_config* cfg, const conform_tensor* x, const conform_block_weights* w,
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
    int32_t (*paged_attention)(const conform_config* cfg, const conform_tensor* q, const conform_tensor* k_cache,
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
} conform_plugin;

/* The one symbol a plugin exports. */
#define CONFORM_PLUGIN_ENTRY_SYMBOL "conform_plugin_get"
typedef const conform_plugin* (*conform_plugin_get_fn)(void);
CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFORM_PLUGIN_H */
