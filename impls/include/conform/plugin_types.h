/* conform/plugin_types.h — what every version of the plugin C ABI shares:
 * the element types, the RoPE enumerations of the 1.1 core, the ops, the
 * block's taps, the status codes and the tensor descriptor (values are part
 * of the ABI, in every version). conform/plugin.h (ABI 2) and
 * conform/plugin_v1.h (ABI 1.x, frozen) both include it. Plain C99.
 */
#ifndef CONFORM_PLUGIN_TYPES_H
#define CONFORM_PLUGIN_TYPES_H

#include <stddef.h>
#include <stdint.h>

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

/* The one symbol a plugin exports, in every version (it returns the
 * version's table; conform reads its first field, abi_version, first). */
#define CONFORM_PLUGIN_ENTRY_SYMBOL "conform_plugin_get"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CONFORM_PLUGIN_TYPES_H */
