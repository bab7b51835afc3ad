/* example.c — an out-of-tree conform plugin: RoPE and RMSNorm in plain C99,
 * built by its own CMake project against nothing but conform/plugin.h.
 *
 *   cmake -S impls/plugin_example -B build-example -DCMAKE_PREFIX_PATH=<conform prefix>
 *   cmake --build build-example
 *   conform --impl-lib build-example/libexample_kernels.so --op rope,rmsnorm
 *
 * Built with -DWRONG_ROPE_INTERLEAVED it becomes its own wrong twin: RoPE that
 * always pairs (x[2i], x[2i+1]) whatever the config says, the bug of loading
 * an HF (NeoX) checkpoint into a Meta-layout kernel. conform must fail it and
 * name the bug.
 */
#include <conform/plugin.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>

/* Leaves `what` in the caller's message buffer and returns `code`. */
static int32_t fail(char* msg, size_t cap, int32_t code, const char* what) {
    if (cap > 0) snprintf(msg, cap, "%s", what);
    return code;
}

/* A float32 matrix [rows, cols] with unit column stride: what these loops index. */
static int is_matrix(const conform_tensor* t, int64_t rows, int64_t cols) {
    return t->dtype == CONFORM_DTYPE_F32 && t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols &&
           t->strides[1] == 1 && t->strides[0] >= cols;
}

/* ---- rmsnorm ------------------------------------------------------------------
 * out = x * rsqrt(mean(x^2) + eps) * w, each row on its own. */
static int32_t example_rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                               const conform_tensor* out, char* msg, size_t msg_cap) {
    if (x->ndim != 2) return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rmsnorm: x must be 2-D");
    const int64_t T = x->shape[0], D = x->shape[1];
    if (!is_matrix(x, T, D) || !is_matrix(out, T, D))
        return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rmsnorm: x and out must be float32 [T, D]");
    if (weight->dtype != CONFORM_DTYPE_F32 || weight->ndim != 1 || weight->shape[0] != D || weight->strides[0] != 1)
        return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rmsnorm: weight must be float32 [D]");
    const float eps = (float)cfg->norm_eps;
    /* The twist norm_plus_one (declared below): Gemma's norms scale by (1 + w),
     * the weight stored as its offset from one. */
    const float w_offset = conform_param_int(cfg, "norm_plus_one", 0) ? 1.0f : 0.0f;
    const float* w = (const float*)weight->data;
    for (int64_t t = 0; t < T; t++) {
        const float* xt = (const float*)x->data + t * x->strides[0];
        float* yt = (float*)out->data + t * out->strides[0];
        float ss = 0.0f;
        for (int64_t i = 0; i < D; i++) ss += xt[i] * xt[i];
        const float inv_rms = 1.0f / sqrtf(ss / (float)D + eps);
        for (int64_t i = 0; i < D; i++) yt[i] = xt[i] * inv_rms * (w[i] + w_offset);
    }
    return CONFORM_OK;
}

/* ---- rope ---------------------------------------------------------------------
 * The first rotary_dim dims of every head of every row rotated by the row's
 * position (pairs formed inside them), the rest passed through. Angles in
 * double. RoPE scaling is not implemented: the table does not declare the
 * twist rope_scaling, so conform draws its rope cases without it. */
static int32_t example_rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                            const conform_tensor* out, char* msg, size_t msg_cap) {
    const int64_t hd = cfg->head_dim;
    if (hd <= 0 || hd % 2 != 0) return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rope: head_dim must be even");
    if (x->ndim != 2 || x->shape[1] % hd != 0)
        return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rope: x must be [T, n * head_dim]");
    const int64_t rd = cfg->rotary_dim > 0 ? cfg->rotary_dim : hd;  /* the twist rotary_dim, declared */
    if (rd % 2 != 0 || rd > hd) return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rope: rotary_dim must be even, <= head_dim");
    const int64_t T = x->shape[0], n_heads = x->shape[1] / hd, half = rd / 2;
    if (!is_matrix(x, T, n_heads * hd) || !is_matrix(out, T, n_heads * hd))
        return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rope: x and out must be float32 [T, n * head_dim]");
    if (positions->dtype != CONFORM_DTYPE_I64 || positions->ndim != 1 || positions->shape[0] != T)
        return fail(msg, msg_cap, CONFORM_ERR_INVALID_ARGUMENT, "rope: positions must be int64 [T]");
#ifdef WRONG_ROPE_INTERLEAVED
    const int neox = 0; /* the bug: the config's layout is ignored */
#else
    const int neox = cfg->rope_layout == CONFORM_ROPE_NEOX;
#endif
    const int64_t* pos = (const int64_t*)positions->data;
    for (int64_t t = 0; t < T; t++) {
        const float* xt = (const float*)x->data + t * x->strides[0];
        float* yt = (float*)out->data + t * out->strides[0];
        for (int64_t h = 0; h < n_heads; h++)
            for (int64_t d = rd; d < hd; d++) yt[h * hd + d] = xt[h * hd + d];  /* not rotated */
        for (int64_t i = 0; i < half; i++) {
            const double inv_freq = pow(cfg->rope_theta, -2.0 * (double)i / (double)rd);
            const double angle = (double)pos[t * positions->strides[0]] * inv_freq;
            const float c = (float)cos(angle), s = (float)sin(angle);
            /* NeoX pairs (i, i + rd/2); interleaved pairs (2i, 2i + 1). */
            const int64_t a = neox ? i : 2 * i;
            const int64_t b = neox ? i + half : 2 * i + 1;
            for (int64_t h = 0; h < n_heads; h++) {
                const float xa = xt[h * hd + a], xb = xt[h * hd + b];
                yt[h * hd + a] = xa * c - xb * s;
                yt[h * hd + b] = xb * c + xa * s;
            }
        }
    }
    return CONFORM_OK;
}

/* ---- the table ------------------------------------------------------------------ */

/* The twists these kernels compute (`conform list --twists`): conform offers
 * them only cases whose twists are all here, and still --cases of each op. */
static const char* const example_twists[] = {"norm_plus_one", "rotary_dim", NULL};

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    /* Ops left out (qk_norm, attention, ...) are NULL: conform skips them. */
    static const conform_plugin table = {
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(conform_plugin),
#ifdef WRONG_ROPE_INTERLEAVED
        .name = "example-wrong-rope",
        .description = "the example, but RoPE pairs (2i, 2i+1) whatever the config says (deliberately wrong)",
#else
        .name = "example",
        .description = "plain C99 RoPE and RMSNorm (impls/plugin_example)",
#endif
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),
        .twists = example_twists,
        .rmsnorm = example_rmsnorm,
        .rope = example_rope,
    };
    return &table;
}
