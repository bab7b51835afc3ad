// impls/scalar/scalar.h — the scalar implementation: plain float32 loops in the
// style of llama2.c's run.c.
//
// Every op is a free function over the contract's views, so the block, the
// Implementation wrapper (scalar_impl.cpp) and the mutants all run the same
// code. Each function checks the shapes of its views against its parameters
// and throws conform::ImplError naming the tensor, the expected and the found
// shape; none of them resizes or writes past an output.
//
// Arithmetic conventions, the same everywhere in this folder:
//   * every reduction has one float accumulator, summed in index order;
//   * no FMA contraction (CMakeLists passes -ffp-contract=off), so a product
//     followed by a sum rounds twice, like the reference's sequential order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "conform/config.h"
#include "conform/impl.h"
#include "conform/tensor.h"
#include "registry.h"

namespace conform::scalar {

// ---- ops (one .cpp each) ---------------------------------------------------

// out[T, N] = x[T, K] @ w[K, N]; one accumulator per output, k ascending.
void matmul(View x, View w, MutView out);

// out[T, D] = x * (1 / sqrt(mean(x^2) + eps)) * w          x[T, D], w[1, D]
void rmsnorm(View x, View w, const RmsNormParams& p, MutView out);

// The row kernel behind rmsnorm and qk_norm: out[n] = x[n] * (1/sqrt(ss/n + eps)) * w[n].
// out may alias x.
void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps);

// out[T, n*hd] = x with every head rotated by its token's position   x[T, n*hd], pos[T]
void rope(View x, Positions pos, const RopeParams& p, MutView out);

// out[T, n*hd] = rmsnorm of every head's hd slice with w[1, hd]
void qk_norm(View x, View w, const QkNormParams& p, MutView out);

// out[T, H*hd] = softmax(q k^T / sqrt(hd), keys with k_pos <= q_pos) v
//   q[T, H*hd], k[S, KV*hd], v[S, KV*hd], q_pos[T], k_pos[S]
// A query row that sees no key at all gets zeros (see attention.cpp).
void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p, MutView out);

// out[T, D] = (silu(x @ w1) * (x @ w3)) @ w2       x[T, D], w1/w3[D, F], w2[F, D]
void swiglu(View x, View w1, View w3, View w2, MutView out);

// ---- the block (block.cpp) -------------------------------------------------

// wqkv[D, (H + 2*KV)*hd] = [wq | wk | wv], concatenated column-wise, row by row,
// so that x @ wqkv = [x @ wq | x @ wk | x @ wv] bitwise.
void pack_qkv(View wq, View wk, View wv, MutView wqkv);

// One forward of the block over T tokens; writes out[Tap::out] and every tap
// whose buffer is non-null, and returns the set it wrote.
TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out);

// The first `prefill` tokens in one forward, then the others one at a time,
// through a KV cache of rotated k and unrotated v. out[T, D].
void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c, MutView out);

// ---- the implementation (scalar_impl.cpp) ----------------------------------

// Throws ImplError unless options.dtype is f32; simd_target and threads are ignored.
std::unique_ptr<Implementation> make_scalar(const ImplOptions& options);

// ---- shape checks shared by the ops ----------------------------------------
namespace detail {

inline std::string shape_str(int64_t rows, int64_t cols) {
    return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// Throws "op: name must be [rows, cols], found [r, c]" (or "... has no data").
inline void expect_shape(const char* op, const char* name, int64_t rows, int64_t cols, const float* data,
                         int64_t want_rows, int64_t want_cols) {
    if (rows != want_rows || cols != want_cols)
        throw ImplError(std::string(op) + ": " + name + " must be " + shape_str(want_rows, want_cols) + ", found " +
                        shape_str(rows, cols));
    if (data == nullptr && rows * cols > 0)
        throw ImplError(std::string(op) + ": " + name + " " + shape_str(rows, cols) + " has no data");
}
inline void expect_shape(const char* op, const char* name, View t, int64_t want_rows, int64_t want_cols) {
    expect_shape(op, name, t.rows, t.cols, t.data, want_rows, want_cols);
}
inline void expect_shape(const char* op, const char* name, MutView t, int64_t want_rows, int64_t want_cols) {
    expect_shape(op, name, t.rows, t.cols, t.data, want_rows, want_cols);
}

inline void expect_positions(const char* op, const char* name, Positions p, int64_t want_n) {
    if (p.n != want_n)
        throw ImplError(std::string(op) + ": " + name + " must have " + std::to_string(want_n) +
                        " entries, found " + std::to_string(p.n));
    if (p.data == nullptr && p.n > 0) throw ImplError(std::string(op) + ": " + name + " has no data");
}

inline void expect(bool ok, const char* op, const std::string& what) {
    if (!ok) throw ImplError(std::string(op) + ": " + what);
}

}  // namespace detail
}  // namespace conform::scalar
