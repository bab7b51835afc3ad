// scalar_impl — the scalar free functions behind the Implementation interface.
#include <algorithm>

#include "scalar.h"

namespace conform::scalar {

// What each op needs from the config; everything else runs for any config.
Support ScalarImpl::supports(Op op, const BlockConfig& c) const { return detail::config_support(op, c); }

void ScalarImpl::rmsnorm(View x, View w, const RmsNormParams& p, MutView out) { scalar::rmsnorm(x, w, p, out); }

void ScalarImpl::rope(View x, Positions pos, const RopeParams& p, MutView out) {
    scalar::rope(x, pos, call_rope(p, pos), out);
}

RopeParams ScalarImpl::rope_for_call(const RopeParams& p, int64_t seq_len) {
    if (p.scaling.type != RopeScalingType::dynamic) return p;
    // _compute_dynamic_ntk_parameters: the base for this length, then plain RoPE with it
    RopeParams fixed = p;
    fixed.theta = rope_dynamic_base(p, static_cast<double>(seq_len));
    fixed.scaling = RopeScaling{};
    return fixed;
}

RopeParams ScalarImpl::call_rope(const RopeParams& p, Positions pos) {
    return rope_for_call(p, std::max(call_len_, rope_seq_len(pos)));
}

void ScalarImpl::paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx,
                                 const PagedAttentionParams& p, MutView out, MutView lse) {
    scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse);
}

void ScalarImpl::mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx,
                               const MlaParams& p, MutView out, MutView lse) {
    scalar::mla_attention(q, ckv_cache, kpe_cache, w_kv_b, idx, p, out, lse, mla_rules());
}

void ScalarImpl::qk_norm(View x, View w, const QkNormParams& p, MutView out) { scalar::qk_norm(x, w, p, out); }

void ScalarImpl::attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                           MutView out) {
    scalar::attention(q, k, v, q_pos, k_pos, p, out);
}

void ScalarImpl::swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) {
    scalar::swiglu(x, w1, w3, w2, out, [this](View a, View b, MutView c) { product(a, b, c); },
                   gate_activation(p.act));
}

void ScalarImpl::moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) {
    scalar::moe(x, w, c, out, route, moe_rules());
}
void ScalarImpl::moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route) {
    scalar::moe_route(x, w, c, route, moe_rules());
}
void ScalarImpl::moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) {
    scalar::moe_experts(x, route, w, c, out, moe_rules());
}

std::unique_ptr<Implementation> make_scalar(const ImplOptions& options) {
    if (options.dtype != DType::f32)
        throw ImplError(std::string("scalar runs float32 only, asked for ") + to_string(options.dtype));
    return std::make_unique<ScalarImpl>();
}

}  // namespace conform::scalar
