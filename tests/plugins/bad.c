/* bad.c — plugins that break the contract on purpose, one way per build
 * (-DBAD_<WAY>), to show that conform reports each one precisely and survives:
 *
 *   BAD_CRASH        rope dereferences NULL (SIGSEGV)
 *   BAD_OVERRUN      rope writes one element past the end of its output
 *   BAD_UNDERRUN     rope writes one element before the start of its output
 *   BAD_UNWRITTEN    rope leaves the last row of its output unwritten
 *   BAD_ERROR        rope returns CONFORM_ERR_INTERNAL with a message
 *   BAD_EXIT         rope calls exit(3)
 *   BAD_INPUT_WRITE  rope writes into its input x
 *   BAD_ABI          the table claims an ABI version this conform does not speak
 *   BAD_NO_SYMBOL    exports its table under another name than conform_plugin_get
 *   BAD_LOAD_CRASH   conform_plugin_get itself crashes
 *
 * rmsnorm is correct in every build, so a run reaches rope for the right reason.
 */
#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int32_t ok_rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                          const conform_tensor* out, char* msg, size_t msg_cap) {
    (void)msg;
    (void)msg_cap;
    const int64_t T = x->shape[0], D = x->shape[1];
    const float* w = (const float*)weight->data;
    /* ABI 1.5: Gemma's norms scale by (1 + w), the weight stored as its offset from one. */
    const float w_offset =
        cfg->struct_size >= offsetof(conform_config, norm_plus_one) + sizeof(uint32_t) && cfg->norm_plus_one ? 1.0f : 0.0f;
    for (int64_t t = 0; t < T; t++) {
        const float* xt = (const float*)x->data + t * x->strides[0];
        float* yt = (float*)out->data + t * out->strides[0];
        float ss = 0.0f;
        for (int64_t i = 0; i < D; i++) ss += xt[i] * xt[i];
        const float inv_rms = 1.0f / sqrtf(ss / (float)D + (float)cfg->norm_eps);
        for (int64_t i = 0; i < D; i++) yt[i] = xt[i] * inv_rms * (w[i] + w_offset);
    }
    return CONFORM_OK;
}

/* NeoX or interleaved as the config says: correct, apart from the one planted bug. */
static int32_t bad_rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                        const conform_tensor* out, char* msg, size_t msg_cap) {
    (void)msg;
    (void)msg_cap;
    const int64_t hd = cfg->head_dim, half = hd / 2;
    const int64_t T = x->shape[0], cols = x->shape[1], n_heads = cols / hd;
    const int64_t* pos = (const int64_t*)positions->data;
    const int neox = cfg->rope_layout == CONFORM_ROPE_NEOX;
    float* y = (float*)out->data;
#if defined(BAD_CRASH)
    volatile float* nowhere = NULL;
    nowhere[T] = 1.0f;
#elif defined(BAD_ERROR)
    snprintf(msg, msg_cap, "device lost while rotating %lld rows", (long long)T);
    return CONFORM_ERR_INTERNAL;
#elif defined(BAD_EXIT)
    exit(3);
#elif defined(BAD_INPUT_WRITE)
    ((float*)x->data)[0] = 0.0f;
#endif
#if defined(BAD_UNWRITTEN)
    const int64_t rows = T - 1; /* the last row keeps conform's poison */
#else
    const int64_t rows = T;
#endif
    for (int64_t t = 0; t < rows; t++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)pos[t] * pow(cfg->rope_theta, -2.0 * (double)i / (double)hd);
            const float c = (float)cos(angle), s = (float)sin(angle);
            const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            for (int64_t h = 0; h < n_heads; h++) {
                const float xa = ((const float*)x->data)[t * cols + h * hd + a];
                const float xb = ((const float*)x->data)[t * cols + h * hd + b];
                y[t * cols + h * hd + a] = xa * c - xb * s;
                y[t * cols + h * hd + b] = xb * c + xa * s;
            }
        }
#if defined(BAD_OVERRUN)
    y[T * cols] = 0.0f;
#elif defined(BAD_UNDERRUN)
    y[-1] = 0.0f;
#endif
    return CONFORM_OK;
}

#if defined(BAD_NO_SYMBOL)
#define ENTRY conform_plugin_table /* a plausible slip: the wrong symbol name */
#else
#define ENTRY conform_plugin_get
#endif

CONFORM_PLUGIN_EXPORT const conform_plugin* ENTRY(void) {
#if defined(BAD_LOAD_CRASH)
    volatile int* nowhere = NULL;
    *nowhere = 1;
#endif
    static const conform_plugin table = {
#if defined(BAD_ABI)
        .abi_version = CONFORM_PLUGIN_ABI_VERSION + 6,
#else
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
#endif
        .struct_size = sizeof(conform_plugin),
        .name = "bad",
        .description = "breaks the plugin contract on purpose (tests/plugins/bad.c)",
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),
        .rmsnorm = ok_rmsnorm,
        .rope = bad_rope,
    };
    return &table;
}
