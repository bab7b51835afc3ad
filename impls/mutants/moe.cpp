// A mixture of experts' bugs that no config edit expresses (the twists' own
// are twist.cpp's): the scalar kernels under one broken MoeRules each.
#include "mutants/mutants.h"

namespace conform::mutants {

namespace {

template <scalar::MoeRules (*R)()>
struct MoeWithRules : scalar::ScalarImpl {
    using ScalarImpl::ScalarImpl;
    scalar::MoeRules moe_rules() const override { return R(); }
};

// scalar's rules with one broken: each MoeRules field (scalar/scalar.h)
// says what its mutant computes instead, and each mutant's hypothesis is
// the ref::Variant of the same name (diagnose/hypotheses.cpp says why each
// is wrong: the weights from scores + e_bias, the down bias after the
// routing weight, the masked groups' 0.0, the router in bf16, ...).
template <bool scalar::MoeRules::*Rule>
scalar::MoeRules broken() {
    scalar::MoeRules r;
    r.*Rule = true;
    return r;
}

}  // namespace

std::unique_ptr<Implementation> group_mask_fill_zero(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::group_mask_zero>>>("group_mask_fill_zero", o);
}
std::unique_ptr<Implementation> router_in_bf16(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::router_bf16>>>("router_in_bf16", o);
}
std::unique_ptr<Implementation> topk_softmax_over_all(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::softmax_over_all>>>("topk_softmax_over_all", o);
}
std::unique_ptr<Implementation> swiglu_clamp_dropped(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::swiglu_clamp_dropped>>>("swiglu_clamp_dropped", o);
}
std::unique_ptr<Implementation> shared_expert_doubled(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::shared_twice>>>("shared_expert_doubled", o);
}
std::unique_ptr<Implementation> selection_bias_in_weights(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::weights_from_choice>>>("selection_bias_in_weights", o);
}
std::unique_ptr<Implementation> expert_bias_after_weight(const ImplOptions& o) {
    return detail::make<MoeWithRules<broken<&scalar::MoeRules::down_bias_after_weight>>>("expert_bias_after_weight", o);
}

}  // namespace conform::mutants
