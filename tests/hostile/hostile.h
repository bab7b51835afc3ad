/* hostile.h — what every plugin of the hostile corpus shares: a correct
 * RMSNorm and RoPE (impls/plugin_example/example.c's maths), so that a
 * plugin passes exactly when its attack works, and a few helpers.
 *
 * The convention of the corpus: each plugin tries its attack on the judge.
 * Where the attack is refused (an errno, nothing found), the plugin says so
 * by failing its call with CONFORM_ERR_INTERNAL and the refusals in the
 * message, which the judge quotes: the cause is named. Where it works, the
 * plugin answers correctly and the case passes — so tests/cli/test_hostile.sh
 * fails the moment a defence is gone. Built against conform/plugin.h only,
 * like any out-of-tree plugin. */
#ifndef CONFORM_HOSTILE_H
#define CONFORM_HOSTILE_H

#include <conform/plugin_v1.h>  /* built against ABI 1.x, which keeps loading */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fails the call with a message (the judge quotes it). */
__attribute__((unused)) static int32_t hostile_fail(char* msg, size_t cap, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (cap > 0) vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return CONFORM_ERR_INTERNAL;
}

/* Appends "what: strerror(e)" (or "what: ok") to a '; '-separated list. */
__attribute__((unused)) static void hostile_note(char* buf, size_t cap, const char* what, int e) {
    const size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    snprintf(buf + n, cap - n, "%s%s: %s", n ? "; " : "", what, e ? strerror(e) : "ALLOWED");
}

/* The judge's --out, from its world-readable /proc/PPID/cmdline: what an
 * attacker of the reports starts from. Unchanged ("reports", say) when absent. */
__attribute__((unused)) static void hostile_out_dir(char* out_dir, size_t cap) {
    char path[64], args[16384];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
    const int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    const ssize_t n = read(fd, args, sizeof args - 1);
    close(fd);
    if (n <= 0) return;
    args[n] = '\0';
    for (const char* a = args; a < args + n; a += strlen(a) + 1)
        if (strcmp(a, "--out") == 0 && a + strlen(a) + 1 < args + n) snprintf(out_dir, cap, "%s", a + strlen(a) + 1);
}

__attribute__((unused)) static int32_t ok_rmsnorm(const conform_config* cfg, const conform_tensor* x, const conform_tensor* weight,
                          const conform_tensor* out, char* msg, size_t msg_cap) {
    (void)msg;
    (void)msg_cap;
    const int64_t T = x->shape[0], D = x->shape[1];
    const float* w = (const float*)weight->data;
    const float w_offset = cfg->norm_plus_one ? 1.0f : 0.0f; /* ABI 1.5: Gemma's (1 + w) */
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

/* Rows [r0, r1) of a correct RoPE (rotary_dim honoured, no scaling). */
__attribute__((unused)) static void ok_rope_rows(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                         const conform_tensor* out, int64_t r0, int64_t r1) {
    const int64_t hd = cfg->head_dim, n_heads = x->shape[1] / hd;
    const int64_t rd = cfg->rotary_dim > 0 ? cfg->rotary_dim : hd, half = rd / 2;
    const int neox = cfg->rope_layout == CONFORM_ROPE_NEOX;
    const int64_t* pos = (const int64_t*)positions->data;
    for (int64_t t = r0; t < r1; t++) {
        const float* xt = (const float*)x->data + t * x->strides[0];
        float* yt = (float*)out->data + t * out->strides[0];
        for (int64_t h = 0; h < n_heads; h++)
            for (int64_t d = rd; d < hd; d++) yt[h * hd + d] = xt[h * hd + d];
        for (int64_t i = 0; i < half; i++) {
            const double angle = (double)pos[t] * pow(cfg->rope_theta, -2.0 * (double)i / (double)rd);
            const float c = (float)cos(angle), s = (float)sin(angle);
            const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            for (int64_t h = 0; h < n_heads; h++) {
                const float xa = xt[h * hd + a], xb = xt[h * hd + b];
                yt[h * hd + a] = xa * c - xb * s;
                yt[h * hd + b] = xb * c + xa * s;
            }
        }
    }
}

__attribute__((unused)) static int32_t ok_rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                       const conform_tensor* out, char* msg, size_t msg_cap) {
    (void)msg;
    (void)msg_cap;
    ok_rope_rows(cfg, x, positions, out, 0, x->shape[0]);
    return CONFORM_OK;
}

/* No RoPE scaling (so that every case offered is one ok_rope gets right). */
__attribute__((unused)) static int32_t ok_supports(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap) {
    if (op == CONFORM_OP_ROPE && cfg->rope_scaling != CONFORM_ROPE_SCALING_NONE) {
        snprintf(msg, msg_cap, "no RoPE scaling");
        return CONFORM_ERR_UNSUPPORTED;
    }
    return CONFORM_OK;
}

/* The table: NAME, then the rope, rmsnorm and supports functions. */
#define HOSTILE_PLUGIN(NAME, DESCRIPTION, ROPE, RMSNORM, SUPPORTS)             \
    CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {     \
        static const conform_plugin table = {                                   \
            .abi_version = CONFORM_PLUGIN_ABI_VERSION,                          \
            .struct_size = sizeof(conform_plugin),                              \
            .name = NAME,                                                       \
            .description = DESCRIPTION,                                         \
            .dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32),                     \
            .supports = SUPPORTS,                                               \
            .rmsnorm = RMSNORM,                                                 \
            .rope = ROPE,                                                       \
            .abi_minor = CONFORM_PLUGIN_ABI_MINOR,                              \
        };                                                                      \
        return &table;                                                          \
    }

#endif
