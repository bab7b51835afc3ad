/* half.c — a correct plugin that runs in float32, bfloat16 and float16, and
 * refuses some configs through its supports function. It checks the parts of
 * the ABI the example leaves out: 16-bit tensors in and out (conform converts
 * at the boundary; this side converts with the compiler's own _Float16, an
 * independent implementation), and CONFORM_ERR_UNSUPPORTED from supports()
 * meaning "skip", not "fail".
 */
#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define MAX_HEAD_DIM 64 /* rope above this is refused through supports() */

static float load(const conform_tensor* t, int64_t i) {
    switch (t->dtype) {
        case CONFORM_DTYPE_BF16: {
            const uint32_t b = (uint32_t)((const uint16_t*)t->data)[i] << 16;
            float f;
            memcpy(&f, &b, sizeof f);
            return f;
        }
        case CONFORM_DTYPE_F16: return (float)((const _Float16*)t->data)[i];
        default: return ((const float*)t->data)[i];
    }
}

/* Rounds to the tensor's dtype, to nearest even. */
static void store(const conform_tensor* t, int64_t i, float v) {
    switch (t->dtype) {
        case CONFORM_DTYPE_BF16: {
            uint32_t b;
            memcpy(&b, &v, sizeof b);
            b += 0x7FFFu + ((b >> 16) & 1u); /* finite inputs only: no NaN reaches here */
            ((uint16_t*)t->data)[i] = (uint16_t)(b >> 16);
            break;
        }
        case CONFORM_DTYPE_F16: ((_Float16*)t->data)[i] = (_Float16)v; break;
        default: ((float*)t->data)[i] = v;
    }
}

static int32_t half_supports(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap) {
    if (op == CONFORM_OP_ROPE && cfg->head_dim > MAX_HEAD_DIM) {
        snprintf(msg, msg_cap, "rope with head_dim %lld > %d is not implemented", (long long)cfg->head_dim,
                 MAX_HEAD_DIM);
        return CONFORM_ERR_UNSUPPORTED;
    }
    return CONFORM_OK;
}

static int32_t half_rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                            const conform_tensor* out, char* msg, size_t msg_cap) {
    if (x->dtype != cfg->dtype || weight->dtype != cfg->dtype || out->dtype != cfg->dtype) {
        snprintf(msg, msg_cap, "rmsnorm: tensors must have the config's dtype %u", cfg->dtype);
        return CONFORM_ERR_INVALID_ARGUMENT;
    }
    const int64_t T = x->shape[0], D = x->shape[1];
    /* ABI 1.5: Gemma's norms scale by (1 + w), the weight stored as its offset from one. */
    const float w_offset =
        cfg->struct_size >= offsetof(conform_config, norm_plus_one) + sizeof(uint32_t) && cfg->norm_plus_one ? 1.0f : 0.0f;
    for (int64_t t = 0; t < T; t++) {
        float ss = 0.0f;
        for (int64_t i = 0; i < D; i++) {
            const float v = load(x, t * x->strides[0] + i);
            ss += v * v;
        }
        const float inv_rms = 1.0f / sqrtf(ss / (float)D + (float)cfg->norm_eps);
        for (int64_t i = 0; i < D; i++)
            store(out, t * out->strides[0] + i, load(x, t * x->strides[0] + i) * inv_rms * (load(weight, i) + w_offset));
    }
    return CONFORM_OK;
}

static int32_t half_rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                         const conform_tensor* out, char* msg, size_t msg_cap) {
    const int64_t hd = cfg->head_dim, half = hd / 2;
    if (hd > MAX_HEAD_DIM) {
        snprintf(msg, msg_cap, "rope: head_dim %lld: supports() said no", (long long)hd);
        return CONFORM_ERR_UNSUPPORTED;
    }
    const int64_t T = x->shape[0], n_heads = x->shape[1] / hd;
    const int64_t* pos = (const int64_t*)positions->data;
    const int neox = cfg->rope_layout == CONFORM_ROPE_NEOX;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)pos[t] * pow(cfg->rope_theta, -2.0 * (double)i / (double)hd);
            const float c = (float)cos(angle), s = (float)sin(angle);
            const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            for (int64_t h = 0; h < n_heads; h++) {
                const float xa = load(x, t * x->strides[0] + h * hd + a);
                const float xb = load(x, t * x->strides[0] + h * hd + b);
                store(out, t * out->strides[0] + h * hd + a, xa * c - xb * s);
                store(out, t * out->strides[0] + h * hd + b, xb * c + xa * s);
            }
        }
    return CONFORM_OK;
}

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static const conform_plugin table = {
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(conform_plugin),
        .name = "half",
        .description = "rmsnorm and rope in f32, bf16 and f16 (tests/plugins/half.c)",
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32) | CONFORM_DTYPE_BIT(CONFORM_DTYPE_BF16) |
                  CONFORM_DTYPE_BIT(CONFORM_DTYPE_F16),
        .supports = half_supports,
        .rmsnorm = half_rmsnorm,
        .rope = half_rope,
    };
    return &table;
}
