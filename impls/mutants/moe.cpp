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

// The weights gathered from scores + e_bias, the scores the choice is made
// on, where DeepSeek-V3 takes the unbiased scores (its bias is for the
// choice only).
scalar::MoeRules biased_weights() {
    scalar::MoeRules r;
    r.weights_from_choice = true;
    return r;
}
// gpt-oss's down bias added after the routing weight, w * (a @ w2) + b2,
// where GptOssExperts adds it first: (a @ w2 + b2) * w.
scalar::MoeRules late_down_bias() {
    scalar::MoeRules r;
    r.down_bias_after_weight = true;
    return r;
}

}  // namespace

std::unique_ptr<Implementation> selection_bias_in_weights(const ImplOptions& o) {
    return detail::make<MoeWithRules<biased_weights>>("selection_bias_in_weights", o);
}
std::unique_ptr<Implementation> expert_bias_after_weight(const ImplOptions& o) {
    return detail::make<MoeWithRules<late_down_bias>>("expert_bias_after_weight", o);
}

}  // namespace conform::mutants
