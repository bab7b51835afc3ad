/* q8.c — swiglu as a llama.cpp CPU kernel computes its weight products:
 * each activation row quantised to Q8_0 (blocks of 32: d = amax / 127 stored
 * as f16, q = roundf(x / d) as int8), then every output a sum over blocks of
 * d_b * (sum of q_k * w[k, n]). It declares so through ABI 1.7's
 * activation_quant, and passes: conform's baselines quantise the same way.
 * Built three ways (tests/plugins/CMakeLists.txt; cli/test_plugin.sh quant):
 *   Q8_UNDECLARED  the same kernel without the declaration: it claims
 *                  float32's accuracy and fails, named precision_downgrade;
 *   Q8_BAD_ANSWER  activation_quant answers 7: refused when it is loaded.
 * Written from ggml's block format (quantize_row_q8_0_ref), not with
 * conform/dtype.h: an independent producer of the same rounding. */
#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { QK8_0 = 32 };

/* One row of n activations as Q8_0 blocks: codes q[n], one scale per block
 * (the last block may be shorter). */
static void quantize_row_q8_0(const float* x, int64_t n, int8_t* q, float* d) {
    for (int64_t b = 0; b * QK8_0 < n; ++b) {
        const int64_t j0 = b * QK8_0, len = n - j0 < QK8_0 ? n - j0 : QK8_0;
        float amax = 0.0f;
        for (int64_t j = 0; j < len; ++j) amax = fmaxf(amax, fabsf(x[j0 + j]));
        const float s = amax / 127.0f;
        const float id = s != 0.0f ? 1.0f / s : 0.0f;
        d[b] = (float)(_Float16)s; /* the block stores its scale in f16 */
        /* A scale that underflows f16 stores 0: the block is zeros (and x * id may be inf). */
        for (int64_t j = 0; j < len; ++j) q[j0 + j] = d[b] == 0.0f ? 0 : (int8_t)roundf(x[j0 + j] * id);
    }
}

/* out[T, N] = dequant(q8_0(x))[T, K] @ w[K, N], block by block. */
static int matmul_q8_0(const float* x, int64_t T, int64_t K, const float* w, int64_t N, float* out) {
    const int64_t nb = (K + QK8_0 - 1) / QK8_0;
    int8_t* q = malloc((size_t)K);
    float* d = malloc((size_t)nb * sizeof(float));
    float* part = malloc((size_t)N * sizeof(float));
    if (!q || !d || !part) return free(q), free(d), free(part), 0;
    for (int64_t t = 0; t < T; ++t) {
        quantize_row_q8_0(x + t * K, K, q, d);
        float* o = out + t * N;
        for (int64_t n = 0; n < N; ++n) o[n] = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
            for (int64_t n = 0; n < N; ++n) part[n] = 0.0f;
            for (int64_t k = b * QK8_0; k < K && k < (b + 1) * QK8_0; ++k)
                for (int64_t n = 0; n < N; ++n) part[n] += (float)q[k] * w[k * N + n];
            for (int64_t n = 0; n < N; ++n) o[n] += d[b] * part[n];
        }
    }
    free(q), free(d), free(part);
    return 1;
}

/* out = (act(x @ w1) * (x @ w3)) @ w2, every product's activations through Q8_0;
 * act = silu, or (1.9) GeGLU's gelu_tanh as a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3)). */
static int32_t q8_swiglu(const conform_config* c, const conform_tensor* x, const conform_tensor* w1,
                         const conform_tensor* w3, const conform_tensor* w2, const conform_tensor* out, char* msg,
                         size_t cap) {
    const int gelu = c->struct_size >= offsetof(conform_config, hidden_act) + sizeof(uint32_t) &&
                     c->hidden_act == CONFORM_HIDDEN_ACT_GELU_TANH;
    const int64_t T = x->shape[0], D = x->shape[1], F = w1->shape[1];
    float* g = malloc((size_t)(T * F) * sizeof(float));
    float* u = malloc((size_t)(T * F) * sizeof(float));
    int ok = g && u && matmul_q8_0(x->data, T, D, w1->data, F, g) && matmul_q8_0(x->data, T, D, w3->data, F, u);
    if (ok) {
        for (int64_t i = 0; i < T * F; ++i) {
            const float a = g[i], z = gelu ? 1.5957691216057308f * (a + 0.044715f * a * a * a) : a;
            g[i] = a / (1.0f + expf(-z)) * u[i];
        }
        ok = matmul_q8_0(g, T, F, w2->data, D, out->data);
    }
    free(g), free(u);
    if (!ok) snprintf(msg, cap, "out of memory");
    return ok ? CONFORM_OK : CONFORM_ERR_INTERNAL;
}

#ifndef Q8_UNDECLARED
static uint32_t q8_activation_quant(uint32_t op) {
#ifdef Q8_BAD_ANSWER
    return op == CONFORM_OP_SWIGLU ? 7u : CONFORM_ACT_QUANT_NONE;
#else
    return op == CONFORM_OP_SWIGLU ? CONFORM_ACT_QUANT_Q8_0 : CONFORM_ACT_QUANT_NONE;
#endif
}
#endif

CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static const conform_plugin table = {
        .abi_version = CONFORM_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(conform_plugin),
        .name = "q8",
        .description = "swiglu with Q8_0 activations, llama.cpp style (tests/plugins/q8.c)",
        .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),
        .swiglu = q8_swiglu,
        .abi_minor = CONFORM_PLUGIN_ABI_MINOR,
#ifndef Q8_UNDECLARED
        .activation_quant = q8_activation_quant,
#endif
    };
    return &table;
}
