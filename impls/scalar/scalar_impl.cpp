// scalar_impl — the scalar free functions behind the Implementation interface.
#include "scalar.h"

namespace conform::scalar {
namespace {

class ScalarImpl : public Implementation {
   public:
    std::string name() const override { return "scalar"; }
    DType dtype() const override { return DType::f32; }

    // What each op needs from the config; everything else runs for any config.
    Support supports(Op op, const BlockConfig& c) const override {
        const bool needs_rope = op == Op::rope || op == Op::block || op == Op::decode;
        const bool needs_gqa = op == Op::attention || op == Op::block || op == Op::decode;
        if (needs_rope && (c.head_dim <= 0 || c.head_dim % 2 != 0))
            return Support::no("RoPE rotates pairs: head_dim must be positive and even, found " +
                               std::to_string(c.head_dim));
        if (needs_gqa && (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0))
            return Support::no("n_heads = " + std::to_string(c.n_heads) + " must be a multiple of n_kv_heads = " +
                               std::to_string(c.n_kv_heads));
        return Support::yes();
    }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override { scalar::rmsnorm(x, w, p, out); }

    void rope(View x, Positions pos, const RopeParams& p, MutView out) override { scalar::rope(x, pos, p, out); }

    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override { scalar::qk_norm(x, w, p, out); }

    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        scalar::attention(q, k, v, q_pos, k_pos, p, out);
    }

    void swiglu(View x, View w1, View w3, View w2, MutView out) override { scalar::swiglu(x, w1, w3, w2, out); }

    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        return scalar::block(x, w, pos, c, out);
    }

    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        scalar::decode(x, w, pos, prefill, c, out);
    }
};

}  // namespace

std::unique_ptr<Implementation> make_scalar(const ImplOptions& options) {
    if (options.dtype != DType::f32)
        throw ImplError(std::string("scalar runs float32 only, asked for ") + to_string(options.dtype));
    return std::make_unique<ScalarImpl>();
}

}  // namespace conform::scalar
