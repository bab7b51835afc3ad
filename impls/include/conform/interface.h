// conform/interface.h — the interface every implementation of the block provides
// (conform/impl.h is this and the op table, conform/op_info.h, together).
//
// Conventions (the same for every implementation, see ../../../fixtures/SCHEMA.md):
//   * all tensors row-major; weights stored [in, out] so that y = x @ W;
//   * outputs are written into caller-owned buffers of exactly the documented
//     shape — never resized, never written past their end;
//   * inputs are float32 at the boundary; an implementation running in a lower
//     dtype converts on entry and back on exit (the harness has already
//     rounded the inputs to that dtype, so conversion is exact);
//   * an op the implementation cannot run for a config returns a Support with
//     ok = false and a reason from supports(); calling it anyway throws.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conform/config.h"
#include "conform/ops.h"
#include "conform/tensor.h"

namespace conform {

// Block weights, all stored [in, out]. q_norm / k_norm are [1, head_dim] and
// present (data != nullptr) iff config.qk_norm.
struct BlockWeights {
    View attn_norm;  // [1, D]
    View wq;         // [D, H*hd]
    View wk;         // [D, KV*hd]
    View wv;         // [D, KV*hd]
    View wo;         // [H*hd, D]
    View ffn_norm;   // [1, D]
    View w1;         // [D, F]   gate
    View w3;         // [D, F]   up
    View w2;         // [F, D]   down
    View q_norm;     // [1, hd]  (qk_norm only)
    View k_norm;     // [1, hd]  (qk_norm only)
};

// A set of taps, as a bitmask over Tap.
struct TapSet {
    uint32_t bits = 0;
    void add(Tap t) { bits |= 1u << static_cast<unsigned>(t); }
    bool has(Tap t) const { return (bits >> static_cast<unsigned>(t)) & 1u; }
};

// Output buffers for block(). `out` is always provided; a tap whose buffer has
// data == nullptr was not requested and must not be written.
struct BlockOutputs {
    std::array<MutView, kAllTaps.size()> taps{};
    MutView& operator[](Tap t) { return taps[static_cast<size_t>(t)]; }
    const MutView& operator[](Tap t) const { return taps[static_cast<size_t>(t)]; }
};

struct Support {
    bool ok = true;
    std::string reason;  // why not, when !ok
    static Support yes() { return {}; }
    static Support no(std::string why) { return {false, std::move(why)}; }
};

// How an implementation is made (the registry's factories take it).
struct ImplOptions {
    DType dtype = DType::f32;
    std::string simd_target;  // simd only: force one compiled Highway target ("" = best)
    int threads = 0;          // 0 = implementation's default
};

// Whether an implementation can run on this machine, and why not.
struct Availability {
    bool available = true;
    std::string reason;  // why not, when !available
};

// Thrown by an implementation for a call it cannot honour.
struct ImplError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Implementation {
   public:
    virtual ~Implementation() = default;

    virtual std::string name() const = 0;
    virtual DType dtype() const = 0;
    virtual Support supports(Op op, const BlockConfig& config) const = 0;

    // out[T, D] = x * rsqrt(mean(x^2, -1) + eps) * w              x[T, D], w[1, D]
    virtual void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) = 0;

    // out[T, n*hd] = x rotated per head by positions               x[T, n*hd], pos[T]
    virtual void rope(View x, Positions pos, const RopeParams& p, MutView out) = 0;

    // out[T, n*hd] = per-head rmsnorm(x_h, w)                       x[T, n*hd], w[1, hd]
    virtual void qk_norm(View x, View w, const QkNormParams& p, MutView out) = 0;

    // out[T, H*hd] = softmax(q k^T / sqrt(hd) + causal(pos)) v     q[T, H*hd], k/v[S, KV*hd]
    virtual void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                           MutView out) = 0;

    // out[T, D] = (silu(x @ w1) * (x @ w3)) @ w2                   no norm, no residual
    virtual void swiglu(View x, View w1, View w3, View w2, MutView out) = 0;

    // One forward of the block over T tokens at positions pos. Fills out[Tap::out]
    // and every requested tap it materialises; returns the taps it wrote.
    virtual TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) = 0;

    // The first `prefill` tokens in one forward, then the rest one at a time
    // through a KV cache (rotated k, unrotated v). out[T, D] is every token's
    // block output; it must equal block() over all T.
    virtual void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                        MutView out) = 0;
};

}  // namespace conform
