// moe_route — a mixture of experts' router: each token's K experts and
// their weights, as a dense [T, E] table (DeepseekV3TopkRouter and
// DeepseekV3MoE.route_tokens_to_experts; Mixtral's and Qwen3-MoE's are the
// softmax case without groups or biases).
#include <cmath>
#include <limits>
#include <vector>

#include "conform/dtype.h"
#include "scalar.h"

namespace conform::scalar {

void check_moe_weights(const char* op, const MoeWeights& w, const BlockConfig& c, bool router, bool experts) {
    const int64_t D = c.d_model, E = c.n_experts, F = c.moe_ffn_dim, Fs = c.moe_shared_ffn_dim;
    detail::expect(E > 0 && c.n_experts_per_tok > 0 && c.n_experts_per_tok <= E, op,
                   "n_experts_per_tok must be in [1, n_experts = " + std::to_string(E) + "], found " +
                       std::to_string(c.n_experts_per_tok));
    if (router) {
        detail::expect_shape(op, "w_router", w.w_router, D, E);
        if (c.moe_router_bias) detail::expect_shape(op, "router_bias", w.router_bias, 1, E);
        if (c.moe_selection_bias) detail::expect_shape(op, "e_bias", w.e_bias, 1, E);
        if (c.moe_n_group > 0)
            detail::expect(E % c.moe_n_group == 0 && c.moe_topk_group >= 1 && c.moe_topk_group <= c.moe_n_group, op,
                           "n_group must divide n_experts and topk_group be in [1, n_group]");
    }
    if (experts) {
        detail::expect_shape(op, "w13", w.w13, E * D, 2 * F);
        detail::expect_shape(op, "w2", w.w2, E * F, D);
        if (c.moe_expert_bias) {
            detail::expect_shape(op, "b13", w.b13, E, 2 * F);
            detail::expect_shape(op, "b2", w.b2, E, D);
        }
        if (Fs > 0) {
            detail::expect_shape(op, "ws13", w.ws13, D, 2 * Fs);
            detail::expect_shape(op, "ws2", w.ws2, Fs, D);
            if (c.moe_shared_gate) detail::expect_shape(op, "ws_gate", w.ws_gate, D, 1);
        }
    }
}

void moe_route_row(float* scores, const MoeWeights& w, const BlockConfig& c, float* route, const MoeRules& rules) {
    const int64_t E = c.n_experts, K = c.n_experts_per_tok;
    const float minus_inf = -std::numeric_limits<float>::infinity();
    if (rules.router_bf16)
        for (int64_t e = 0; e < E; e++) scores[e] = round_bf16(scores[e]);
    // scores = softmax(logits, dim=-1) | logits.sigmoid()
    if (c.moe_scoring == MoeScoring::softmax) {
        float m = scores[0], sum = 0.0f;
        for (int64_t e = 1; e < E; e++) m = std::max(m, scores[e]);
        for (int64_t e = 0; e < E; e++) sum += (scores[e] = std::exp(scores[e] - m));
        for (int64_t e = 0; e < E; e++) scores[e] /= sum;
    } else {
        for (int64_t e = 0; e < E; e++) scores[e] = 1.0f / (1.0f + std::exp(-scores[e]));
    }
    if (rules.router_bf16)
        for (int64_t e = 0; e < E; e++) scores[e] = round_bf16(scores[e]);
    // scores_for_choice = scores + e_score_correction_bias
    std::vector<float> choice(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; e++) choice[e] = c.moe_selection_bias ? scores[e] + w.e_bias.data[e] : scores[e];
    // Grouped top-k: each group's score (its best, or its two best summed);
    // the experts of all but the topk_group best groups out of the choice.
    if (c.moe_n_group > 0) {
        const int64_t G = c.moe_n_group, size = E / G;
        std::vector<float> group(static_cast<size_t>(G));
        for (int64_t g = 0; g < G; g++) {
            float first = minus_inf, second = minus_inf;
            for (int64_t i = g * size; i < (g + 1) * size; i++) {
                if (choice[i] > first) second = first, first = choice[i];
                else if (choice[i] > second) second = choice[i];
            }
            group[g] = c.moe_group_score == MoeGroupScore::max || size < 2 ? first : first + second;
        }
        std::vector<bool> kept(static_cast<size_t>(G), false);
        for (int64_t n = 0; n < c.moe_topk_group; n++) {
            int64_t best = -1;
            for (int64_t g = 0; g < G; g++)
                if (!kept[g] && (best < 0 || group[g] > group[best])) best = g;
            kept[best] = true;
        }
        for (int64_t e = 0; e < E; e++)
            if (!kept[e / size]) choice[e] = rules.group_mask_zero ? 0.0f : minus_inf;
    }
    // topk_indices = topk(scores_for_choice, k): the K largest, one at a time
    std::vector<int64_t> chosen;
    std::vector<bool> taken(static_cast<size_t>(E), false);
    for (int64_t k = 0; k < K; k++) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; e++)
            if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
        taken[best] = true;
        chosen.push_back(best);
    }
    // topk_weights = scores.gather(1, topk_indices); renormalised (+ 1e-20); * routed_scaling_factor
    const float* from = rules.weights_from_choice ? choice.data() : scores;
    float sum = 0.0f;
    for (int64_t e : chosen) sum += from[e];
    for (int64_t e = 0; e < E; e++) route[e] = 0.0f;
    for (int64_t e : chosen) {
        const bool renorm = c.moe_norm_topk_prob && !(rules.softmax_over_all && c.moe_scoring == MoeScoring::softmax);
        float v = renorm ? from[e] / (sum + 1e-20f) : from[e];
        if (c.moe_routed_scaling_factor > 0) v *= static_cast<float>(c.moe_routed_scaling_factor);
        route[e] = v;
    }
}

void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route, const MoeRules& rules) {
    const int64_t T = x.rows, D = c.d_model, E = c.n_experts;
    detail::expect_shape("moe_route", "x", x, T, D);
    detail::expect_shape("moe_route", "route", route, T, E);
    check_moe_weights("moe_route", w, c, true, false);
    std::vector<float> scores(static_cast<size_t>(E));
    for (int64_t t = 0; t < T; t++) {
        const float* xt = x.data + t * D;
        // router_logits = x @ w_router (+ router_bias)
        for (int64_t e = 0; e < E; e++) {
            float l = 0.0f;
            for (int64_t d = 0; d < D; d++) l += xt[d] * w.w_router.data[d * E + e];
            scores[e] = c.moe_router_bias ? l + w.router_bias.data[e] : l;
        }
        moe_route_row(scores.data(), w, c, route.data + t * E, rules);
    }
}

}  // namespace conform::scalar
