// impls/simd/kernels.h — the per-target kernels, seen from target-independent
// code (the block, the ops, the bench).
//
// Each kernel works on a range of rows, heads or weight panels so the caller
// can split it over the thread pool; the split never changes a result, because
// every output element is computed by one call, in an order that does not
// depend on the range it came in.
//
// Storage: activations and weights are f32 or bf16 (Elem); arithmetic and
// accumulation are always f32. bf16 is stored rounded to nearest even.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/base.h>

#include "conform/config.h"
#include "conform/dtype.h"
#include "simd/target.h"

namespace conform::simd {

using bf16 = hwy::bfloat16_t;

enum class Elem : uint8_t { f32, bf16 };
inline size_t elem_bytes(Elem e) { return e == Elem::f32 ? 4 : 2; }

// float -> bf16, round to nearest even; NaN stays NaN (conform/dtype.h).
// (Highway 1.0.3's BF16FromF32 and DemoteTo(bf16) truncate, which would bias
// every stored value.)
inline bf16 to_bf16(float f) {
    bf16 b;
    b.bits = bf16_bits(f);
    return b;
}
inline float to_f32(bf16 b) { return hwy::F32FromBF16(b); }

// A row-major matrix of f32 or bf16 elements; ld is in elements.
struct CRows {
    const void* data = nullptr;
    size_t ld = 0;
    Elem elem = Elem::f32;
};
struct MRows {
    void* data = nullptr;
    size_t ld = 0;
    Elem elem = Elem::f32;
    operator CRows() const { return {data, ld, elem}; }
};

// Rows from `row` on.
inline CRows rows_from(CRows m, size_t row) {
    return {static_cast<const char*>(m.data) + row * m.ld * elem_bytes(m.elem), m.ld, m.elem};
}
inline MRows rows_from(MRows m, size_t row) {
    return {static_cast<char*>(m.data) + row * m.ld * elem_bytes(m.elem), m.ld, m.elem};
}

// ---- matmul (matmul-inl.h) ---------------------------------------------------

// Weights are packed once into panels of kPanel columns, [n_panels][K][kPanel]
// (pack.h), so a product streams each panel contiguously: a decode step reads
// every weight byte once, in order, and a prefill tile reads a kc x kPanel
// slab that stays in L1. The width is fixed for every target (two AVX2
// vectors, one AVX-512 vector), so packed weights are target-independent.
constexpr size_t kPanel = 16;

enum class Epilogue : uint8_t {
    store,     // c = acc
    bias,      // c = acc + bias[col], added in f32 before the one store (nn.Linear with bias)
    residual,  // c = residual + acc; raw = acc when raw.data (the block's taps)
    swiglu,    // panel j holds w1's columns 8j..8j+7 then w3's: c[:, 8j + i] = silu(gate_i) * up_i
    geglu,     // the same panels: c[:, 8j + i] = gelu_tanh(gate_i) * up_i (config.hidden_act)
};

// The fused gate/up product's epilogue for config.hidden_act.
inline Epilogue gate_epilogue(HiddenAct a) { return a == HiddenAct::gelu_tanh ? Epilogue::geglu : Epilogue::swiglu; }

struct Gemm {
    const float* a = nullptr;  // A packed by pack_a for the target (M x K)
    size_t M = 0, K = 0;
    const void* b = nullptr;  // packed weights: n_panels panels of [K][kPanel]
    Elem b_elem = Elem::f32;
    size_t n_panels = 0;
    size_t N = 0;  // columns of c
    Epilogue epilogue = Epilogue::store;
    MRows c;
    CRows residual;            // Epilogue::residual, the same Elem as c
    MRows raw;                 // Epilogue::residual, optional, any Elem
    const float* bias = nullptr;  // Epilogue::bias: [N], f32 holding the stored values
    float* partial = nullptr;  // [M][n_panels * kPanel]: running sums between K blocks (M > row block only)
};

namespace kern {
// Rows per block of packed A on this target (as many as keep a tile's sums in registers).
size_t gemm_row_block(Target t);
// Packs rows [r0, r1) of A (r0 a multiple of the row block) into `packed`
// (M * K floats): block b holds rows [b*mr, b*mr + rows) as [K][rows].
void pack_a(Target t, CRows a, size_t M, size_t K, float* packed, size_t r0, size_t r1);
// Computes the output columns of panels [p0, p1).
void gemm_panels(Target t, const Gemm& g, size_t p0, size_t p1);
}  // namespace kern

// Longest head the kernels hold on the stack (supports() refuses longer ones;
// real checkpoints use 64..256).
constexpr size_t kMaxHeadDim = 512;

// ---- norms (rmsnorm-inl.h, qk_norm-inl.h) -------------------------------------

namespace kern {
// out = x * (1 / sqrt(mean(x^2) + eps)) * w, rows [r0, r1), width D.
void rmsnorm_rows(Target t, CRows x, const float* w, size_t D, float eps, MRows out, size_t r0, size_t r1);
// h = r + d, then n = rmsnorm(h) * w, in one pass over each row. r, d and n
// share one Elem; h (the residual stream) is f32.
void add_rmsnorm_rows(Target t, CRows r, CRows d, MRows h, const float* w, size_t D, float eps, MRows n,
                      size_t r0, size_t r1);
// rmsnorm of every head_dim slice (n_heads per row) with the shared w[hd].
void qk_norm_rows(Target t, CRows x, size_t n_heads, size_t hd, const float* w, float eps, MRows out, size_t r0,
                  size_t r1);
}  // namespace kern

// ---- RoPE (rope-inl.h) ---------------------------------------------------------

// One token's rotation, precomputed (rope_table.h): cos[rd] then sin[rd],
// expanded per lane so that out[j] = x[j] * cos[j] + x[partner(j)] * sin[j]
// for both layouts (sin carries the sign of its term), j < rd; dims
// [rd, hd) of each head pass through (partial rotary).
struct RopeRows {
    const float* const* rows = nullptr;  // one per token
    size_t hd = 0;
    size_t rd = 0;  // rotary dims, even, <= hd
    RopeLayout layout = RopeLayout::neox;
};

namespace kern {
void rope_rows(Target t, CRows x, size_t n_heads, const RopeRows& table, MRows out, size_t r0, size_t r1);

// The block's fused step after the QKV product: per token, q and k heads are
// (QK-normed and) rotated in one pass from the packed [q | k | v] row; k_rot
// and v go straight to their cache rows.
struct QkvRope {
    CRows qkv;  // [T][(H + 2 KV) hd]
    size_t H = 0, KV = 0;
    RopeRows table;
    const float* q_norm = nullptr;  // [hd]; null: no QK-norm
    const float* k_norm = nullptr;
    float eps = 0;
    MRows q_rot;  // [T][H hd]
    MRows k_rot;  // [T][KV hd]   (cache rows of these tokens)
    MRows v;      // [T][KV hd]   (cache rows of these tokens)
};
void qkv_rope_rows(Target t, const QkvRope& job, size_t r0, size_t r1);
}  // namespace kern

// ---- attention (attention-inl.h) -----------------------------------------------

// q, k, v and out share one Elem. The mask, the logits' transform and the
// sinks are the variant's (conform/config.h AttentionVariant).
struct Attn : AttentionVariant {
    CRows q;  // [T][H hd]
    CRows k;  // [S][KV hd]
    CRows v;  // [S][KV hd]
    const int64_t* q_pos = nullptr;
    const int64_t* k_pos = nullptr;
    size_t T = 0, S = 0, H = 0, KV = 0, hd = 0;
    MRows out;  // [T][H hd]
};

// ---- paged attention (paged_attention-inl.h) ----------------------------------

// One split's partial state for a (query row, head): running max, sum, and
// the unnormalised output [hdp].
struct PagedPartial {
    float* m;
    float* l;
    float* acc;
};

struct PagedJob : AttentionVariant {
    CRows q;     // [T][H hd]
    CRows k, v;  // [pages * P][KV hd]
    const int64_t* qo_indptr = nullptr;        // [B + 1]
    const int64_t* kv_indptr = nullptr;        // [B + 1]
    const int64_t* kv_indices = nullptr;       // [pages listed]
    const int64_t* kv_last_page_len = nullptr; // [B]
    size_t T = 0, B = 0, H = 0, KV = 0, hd = 0, P = 0;
    // An FP8 cache: k and v hold one byte per value (the codes the cache
    // write stored), and kv head g reads code c as lut[g * 256 + c] = c's
    // value * g's scale (the dequantisation, tabled). nullptr: no FP8 cache.
    const float* k_lut = nullptr;
    const float* v_lut = nullptr;
    MRows out;  // [T][H hd]
    // Set by paged_attention(): keys per split (whole pages), splits per
    // sequence at most, and the partial states [T][H][splits][stride].
    size_t split = 0, splits = 0, stride = 0;
    float* partials = nullptr;

    int64_t kv_len(size_t b) const {
        const int64_t n = kv_indptr[b + 1] - kv_indptr[b];
        return n == 0 ? 0 : (n - 1) * static_cast<int64_t>(P) + kv_last_page_len[b];
    }
    PagedPartial partial(size_t t, size_t h, size_t c) const {
        float* p = partials + ((t * H + h) * splits + c) * stride;
        return {p, p + 1, p + 2};
    }
};

// ---- latent attention (mla_attention.cpp) ---------------------------------------

// DeepSeek's MLA in the absorbed form, float32 between its steps: q [T][H (dn + dr)],
// w_kv_b [dc][ld] (head h's columns h (dn + dv) ... = [w_uk | w_uv]); out
// [T][H dv]. q_abs and o_lat [T][H][da], da = dc + dr, are the kernel's.
struct MlaJob {
    const float* q = nullptr;
    CRows w_kv_b;  // float32 or bf16, as the latent cache is kept
    size_t T = 0, H = 0, dc = 0, dn = 0, dr = 0, dv = 0, da = 0;
    double scale = 0;  // the model's: attn_scale, or 1 / sqrt(dn + dr)
    float* q_abs = nullptr;
    float* o_lat = nullptr;
    float* out = nullptr;
};

namespace kern {
// Work item i = (token i / KV, kv head i % KV): every query head of that kv
// group, so each key and value row is read once per token for the group.
void attention_items(Target t, const Attn& job, size_t i0, size_t i1);
}  // namespace kern

}  // namespace conform::simd
