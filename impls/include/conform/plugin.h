/* conform/plugin.h — the C ABI for implementations that live outside this
 * repository (an engine's own kernels, in its own build): version 2.
 *
 * Plain C99, also valid C++: no C++ types cross the boundary, every field has
 * an explicit size, every enum travels as a uint32_t. A plugin is a shared
 * library exporting one symbol,
 *
 *     CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void);
 *
 * which returns a table (static storage; conform never frees it) naming the
 * implementation, the ABI version it was built against, the dtypes it runs
 * in, the twists it computes and one function per op; a NULL function is an
 * op it does not implement. `conform --impl-lib libfoo.so` loads it and runs
 * it like an in-repo implementation. impls/PLUGINS.md has the walkthrough and
 * a complete example.
 *
 * Versioning. Version 2 is the last bump for twists. Its config is the 1.1
 * core (sizes, RoPE and its scaling, norm eps, QK-norm) and the page size,
 * frozen; every served twist (a sliding window, sinks, a soft-cap, an FP8 KV
 * cache, and every one added after this header: `conform list --twists`)
 * travels as a named parameter, with the tensors it brings. A plugin lists
 * the twists it computes in its table, and conform offers it only cases
 * whose twists are all listed (an undeclared twist costs it no case: its
 * cases are drawn without it). So a new twist needs no edit here and no new
 * version. Plugins built against version 1 (conform/plugin_v1.h) keep
 * loading: their minor says which twists they knew.
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

#include <string.h>

#include "conform/plugin_types.h"

#define CONFORM_PLUGIN_ABI_VERSION 2u

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a twist, by name ------------------------------------------------------------ */

/* How a parameter's value travels. */
enum {
    CONFORM_PARAM_INT = 0,    /* i: a toggle (0 / 1) or a count (a window of keys, a chunk of positions) */
    CONFORM_PARAM_FLOAT = 1,  /* f: a number (a soft-cap, a score scale) */
    CONFORM_PARAM_NAME = 2,   /* s: one of a choice's values ("gelu_tanh", "fp8_e4m3") */
    CONFORM_PARAM_TENSOR = 3  /* t: a tensor a twist brings (sinks, bq, k_scale, ...) */
};

/* One named parameter of a call: every twist the op reads, on or off, with
 * its value (`conform list --twists --json` names them, their kinds and
 * values, and what each computes; docs/twists.md), and every tensor a twist
 * that is on brings. A twist the plugin did not list is never on in a call. */
typedef struct conform_param {
    const char* name;
    uint32_t type; /* CONFORM_PARAM_* */
    uint32_t reserved;
    int64_t i;
    double f;
    const char* s;
    conform_tensor t;
} conform_param;

/* ---- what a call receives -------------------------------------------------- */

/* The block's configuration and every op's parameters in one struct: the
 * sizes and conventions every version has (1.1's core and the page size),
 * then the twists by name. An op reads what it needs; a field it has no use
 * for is 0 or the config's own value.
 *   rmsnorm:   d_model, norm_eps                (y = x * rsqrt(mean(x^2) + eps) * w)
 *   rope:      head_dim, n_heads, rope_layout, rope_theta, rotary_dim, rope_scaling and its parameters
 *   qk_norm:   head_dim, n_heads, norm_eps      (rmsnorm over each head's slice)
 *   attention: n_heads, n_kv_heads, head_dim    (causal by position, scale 1/sqrt(hd) unless attn_scale;
 *              query head h reads kv head h / (n_heads / n_kv_heads))
 *   swiglu:    d_model, ffn_dim                 ((act(x@w1) * (x@w3)) @ w2, act per hidden_act)
 *   block, decode: all of them but page_size
 *   paged_attention: n_heads, n_kv_heads, head_dim, page_size */
typedef struct conform_config {
    uint32_t struct_size; /* sizeof(conform_config) as conform built it */
    uint32_t dtype;       /* CONFORM_DTYPE_* every float tensor of the call has */
    int64_t d_model;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t ffn_dim;
    uint32_t rope_layout; /* CONFORM_ROPE_* */
    uint32_t qk_norm;     /* 1: Qwen3 per-head RMSNorm on q and k before RoPE (listed as twist qk_norm) */
    double rope_theta;
    double norm_eps;
    int64_t rotary_dim;     /* dims of each head RoPE rotates (the first ones; = head_dim unless partial) */
    uint32_t rope_scaling;  /* CONFORM_ROPE_SCALING_* */
    uint32_t reserved0;
    double rope_factor;                  /* LINEAR, LLAMA3, YARN, DYNAMIC */
    double rope_low_freq_factor;         /* LLAMA3 */
    double rope_high_freq_factor;        /* LLAMA3 */
    int64_t rope_original_max_position;  /* LLAMA3, YARN, DYNAMIC */
    double rope_beta_fast;               /* YARN */
    double rope_beta_slow;               /* YARN */
    double rope_attention_factor;        /* YARN: multiplies cos and sin (1 otherwise) */
    int64_t page_size;                   /* paged_attention: slots per page of the KV cache (P) */
    /* The twists the op reads and the tensors they bring, by name (above). */
    const conform_param* params;
    int64_t n_params;
} conform_config;

/* A parameter of the call by name; NULL when it has none of that name. */
static inline const conform_param* conform_param_find(const conform_config* cfg, const char* name) {
    for (int64_t k = 0; k < cfg->n_params; ++k)
        if (strcmp(cfg->params[k].name, name) == 0) return &cfg->params[k];
    return NULL;
}
/* A toggle's or a count's value; `otherwise` where the call has none of that name. */
static inline int64_t conform_param_int(const conform_config* cfg, const char* name, int64_t otherwise) {
    const conform_param* p = conform_param_find(cfg, name);
    return p && p->type == CONFORM_PARAM_INT ? p->i : otherwise;
}
static inline double conform_param_float(const conform_config* cfg, const char* name, double otherwise) {
    const conform_param* p = conform_param_find(cfg, name);
    return p && p->type == CONFORM_PARAM_FLOAT ? p->f : otherwise;
}
/* A choice's value ("silu", "gelu_tanh"); `otherwise` where the call has none. */
static inline const char* conform_param_name(const conform_config* cfg, const char* name, const char* otherwise) {
    const conform_param* p = conform_param_find(cfg, name);
    return p && p->type == CONFORM_PARAM_NAME ? p->s : otherwise;
}
/* A twist's tensor (sinks [n_heads], bq, k_scale, ...); NULL where the call has none. */
static inline const conform_tensor* conform_param_tensor(const conform_config* cfg, const char* name) {
    const conform_param* p = conform_param_find(cfg, name);
    return p && p->type == CONFORM_PARAM_TENSOR ? &p->t : NULL;
}

/* The block's weights, stored [in, out]; q_norm / k_norm have data != NULL
 * iff config->qk_norm. A twist's weights (bq, bk, bv, sinks, attn_post_norm,
 * ffn_post_norm, decode's k_scale, v_scale) are the config's parameters. */
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
} conform_block_weights;

/* ---- the table a plugin exports -------------------------------------------- */

typedef struct conform_plugin {
    uint32_t abi_version; /* CONFORM_PLUGIN_ABI_VERSION (2) */
    uint32_t struct_size; /* sizeof(conform_plugin) */
    const char* name;     /* implementation name for --impl: [A-Za-z0-9_.-]+ */
    const char* description;
    uint32_t dtypes;      /* CONFORM_DTYPE_BIT(...) of each dtype it runs in */
    uint32_t reserved;

    /* The twists it computes (`conform list --twists`), NULL-terminated: a
     * twist's name ("sliding_window": every value), or a choice's one value
     * ("hidden_act=gelu_tanh"), either after "op:" for one op only
     * ("decode:kv_cache_dtype=fp8_e4m3"). NULL: none (the Llama block as the
     * 1.1 core has it). conform offers it only cases whose twists are all here. */
    const char* const* twists;

    /* Optional (NULL: every config of an implemented op is supported).
     * CONFORM_OK to accept a config; CONFORM_ERR_UNSUPPORTED with a reason in
     * msg to have conform report the case not run rather than fail it. */
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

    /* A batch of B sequences over a paged KV cache, FlashInfer's layout
     * (fixtures/SCHEMA.md, "paged_attention's batch"; impls/PLUGINS.md):
     *   q[T, H*hd]                  every sequence's new queries, ragged, in batch order
     *   k_cache, v_cache[pages*P, KV*hd]   page p is rows p*P .. p*P + P - 1, P = cfg->page_size;
     *                               rows no sequence owns hold NaN and must not be read
     *   qo_indptr[B+1], kv_indptr[B+1], kv_indices[kv_indptr[B]], kv_last_page_len[B]: int32
     *   out[T, H*hd], lse[T, H]     per sequence, causal bottom-right; lse the natural log of each
     *                               row's softmax denominator. A row that sees no key: out 0, lse -inf. */
    int32_t (*paged_attention)(const conform_config* cfg, const conform_tensor* q, const conform_tensor* k_cache,
                               const conform_tensor* v_cache, const conform_tensor* qo_indptr,
                               const conform_tensor* kv_indptr, const conform_tensor* kv_indices,
                               const conform_tensor* kv_last_page_len, const conform_tensor* out,
                               const conform_tensor* lse, char* msg, size_t msg_cap);

    /* Optional (NULL: CONFORM_ACT_QUANT_NONE for every op). What the plugin
     * does to the activations of every weight product of `op` (a
     * CONFORM_OP_*) before it: a CONFORM_ACT_QUANT_*. Asked once per op it
     * implements when it is loaded; only swiglu, block and decode have
     * weight products, and any other answer there is a load error. */
    uint32_t (*activation_quant)(uint32_t op);

    /* ---- appended to version 2: conform reads them only where struct_size
     * covers them (a table built before has none, and is not offered these
     * ops). NULL: not implemented. ---------------------------------------------
     * A mixture-of-experts FFN (docs/moe.md), weights [in, out]. Its sizes are
     * parameters, as its twists are: "n_experts" (E), "n_experts_per_tok" (K),
     * "moe_ffn_dim" (Fe), each CONFORM_PARAM_INT; so are its twists' tensors
     * by their schema names: router_bias [E], e_bias [E] (1-D), b13 [E, 2*Fe],
     * b2 [E, D], ws13 [D, 2*Fs], ws2 [Fs, D], ws_gate [D, 1].
     *   x[T, D], w_router[D, E]
     *   w13[E*D, 2*Fe]  expert e's gate and up in rows e*D .. e*D + D - 1
     *   w2[E*Fe, D]     expert e's down projection in rows e*Fe .. e*Fe + Fe - 1
     *   route[T, E]     token t's weight on expert e, exactly 0 where not chosen
     *   out[T, D]       sum over chosen e of route[t, e] * expert_e(x_t) (+ the shared expert)
     * moe_route writes route; moe_experts takes it (its nonzero entries are the
     * choice) and writes out; moe writes both. */
    int32_t (*moe_route)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* w_router,
                         const conform_tensor* route, char* msg, size_t msg_cap);
    int32_t (*moe_experts)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* route,
                           const conform_tensor* w13, const conform_tensor* w2, const conform_tensor* out, char* msg,
                           size_t msg_cap);
    int32_t (*moe)(const conform_config* cfg, const conform_tensor* x, const conform_tensor* w_router,
                   const conform_tensor* w13, const conform_tensor* w2, const conform_tensor* route,
                   const conform_tensor* out, char* msg, size_t msg_cap);

    /* Multi-head latent attention (DeepSeek-V2/V3; docs/mla.md) over a paged
     * latent cache, batched and indexed as paged_attention. Its sizes are
     * parameters: "kv_lora_rank" (dc), "qk_nope_head_dim" (dn),
     * "qk_rope_head_dim" (dr), "v_head_dim" (dv), each CONFORM_PARAM_INT; the
     * scale is the twist "attn_scale" where on, else 1/sqrt(dn + dr).
     *   q[T, H*(dn+dr)]          per head [q_nope | q_pe]
     *   ckv_cache[pages*P, dc]   the latents c_kv; kpe_cache[pages*P, dr] the RoPE'd keys k_pe
     *   w_kv_b[dc, H*(dn+dv)]    kv_b_proj, per head [w_uk | w_uv] columns
     *   out[T, H*dv], lse[T, H]  as paged_attention's, over k = [c_kv @ w_uk | k_pe], v = c_kv @ w_uv */
    int32_t (*mla_attention)(const conform_config* cfg, const conform_tensor* q, const conform_tensor* ckv_cache,
                             const conform_tensor* kpe_cache, const conform_tensor* w_kv_b,
                             const conform_tensor* qo_indptr, const conform_tensor* kv_indptr,
                             const conform_tensor* kv_indices, const conform_tensor* kv_last_page_len,
                             const conform_tensor* out, const conform_tensor* lse, char* msg, size_t msg_cap);
} conform_plugin;

typedef const conform_plugin* (*conform_plugin_get_fn)(void);
CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFORM_PLUGIN_H */
