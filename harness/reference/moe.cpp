// A mixture-of-experts FFN as HF's modeling files compute it (weights
// stored [in, out], so x @ W): the router (MixtralSparseMoeBlock,
// Qwen3MoeSparseMoeBlock, DeepseekV3TopkRouter / DeepseekV3MoE.route_tokens_to_experts,
// GptOssTopKRouter, Llama4Router), the experts (MixtralBlockSparseTop2MLP,
// GptOssExperts) and the shared expert (DeepseekV3MoE.shared_experts,
// Qwen2MoeSparseMoeBlock.shared_expert_gate). docs/moe.md says which model
// takes which twist.
#include <limits>
#include <stdexcept>

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// silu(gate) * up, or gpt-oss's clamped form (GptOssExperts._apply_gate):
//   gate = gate.clamp(max=limit); up = up.clamp(-limit, limit)
//   glu = gate * sigmoid(gate * 1.702); (up + 1) * glu
// (clamp false: a bug's form, the clamps dropped)
torch::Tensor gated(const torch::Tensor& gate, const torch::Tensor& up, double limit, bool clamp = true) {
    if (limit <= 0) return torch::silu(gate) * up;
    const auto g = clamp ? gate.clamp_max(limit) : gate;
    const auto u = clamp ? up.clamp(-limit, limit) : up;
    return g * torch::sigmoid(g * 1.702) * (u + 1.0);
}

// h [n, 2F] → (gate, up): [gate | up], or interleaved gate, up, gate, ... (gpt-oss's gate_up[..., ::2], [..., 1::2])
std::pair<torch::Tensor, torch::Tensor> split_gate_up(const torch::Tensor& h, bool interleaved) {
    const int64_t F = h.size(1) / 2;
    if (interleaved) return {h.slice(1, 0, 2 * F, 2), h.slice(1, 1, 2 * F, 2)};
    return {h.narrow(1, 0, F), h.narrow(1, F, F)};
}

// The K chosen experts of each token from a [T, E] choice table, [T, K] int64.
torch::Tensor taken_indices(const std::vector<uint8_t>& taken, int64_t T, int64_t E, int64_t K) {
    if (static_cast<int64_t>(taken.size()) != T * E)
        throw std::logic_error("route_taken has " + std::to_string(taken.size()) + " entries, want T * E = " +
                               std::to_string(T * E));
    auto idx = torch::empty({T, K}, torch::kInt64);
    auto a = idx.accessor<int64_t, 2>();
    for (int64_t t = 0; t < T; ++t) {
        int64_t k = 0;
        for (int64_t e = 0; e < E; ++e)
            if (taken[static_cast<size_t>(t * E + e)]) {
                if (k == K) throw std::logic_error("route_taken: token " + std::to_string(t) + " has more than K experts");
                a[t][k++] = e;
            }
        if (k != K) throw std::logic_error("route_taken: token " + std::to_string(t) + " has fewer than K experts");
    }
    return idx;
}

}  // namespace

MoeScores moe_scores(const torch::Tensor& x, const MoeTensors& w, const BlockConfig& c, const Ctx& ctx) {
    MoeScores s;
    s.logits = matmul(x, w.w_router, ctx);  // router_logits = F.linear(hidden_states, self.weight, self.bias)
    if (c.moe_router_bias) s.logits = s.logits + w.router_bias.reshape({1, -1});
    // (a bug's form: the router in bf16, its logits and scores rounded so)
    auto held = [&](const torch::Tensor& t) {
        return ctx.v.moe_router_bf16 ? t.to(torch::kBFloat16).to(t.scalar_type()) : t;
    };
    s.logits = held(s.logits);
    // softmax(router_logits, dim=-1) | router_logits.sigmoid()
    s.scores = held(c.moe_scoring == MoeScoring::softmax ? torch::softmax(s.logits, -1) : torch::sigmoid(s.logits));
    // scores_for_choice = scores + e_score_correction_bias
    s.choice = c.moe_selection_bias ? s.scores + w.e_bias.reshape({1, -1}) : s.scores;
    if (c.moe_n_group > 0) {
        // group_scores = scores_for_choice.view(T, n_group, -1).topk(2, dim=-1)[0].sum(dim=-1)  (V3)
        //              | scores_for_choice.view(T, n_group, -1).max(dim=-1).values            (V2)
        const int64_t T = x.size(0), G = c.moe_n_group;
        const auto grouped = s.choice.reshape({T, G, -1});
        s.group_scores = c.moe_group_score == MoeGroupScore::top2_sum
                             ? std::get<0>(grouped.topk(std::min<int64_t>(2, grouped.size(2)), -1)).sum(-1)
                             : std::get<0>(grouped.max(-1));
        // group_idx = topk(group_scores, k=topk_group); the other groups' experts masked
        // (with -inf: HF's masked_fill(..., 0.0) lets a masked expert beat a negative biased score)
        const auto group_idx = std::get<1>(torch::topk(s.group_scores, c.moe_topk_group, -1));
        const auto group_mask = torch::zeros({T, G}, torch::kBool).scatter(1, group_idx, true);
        const auto score_mask = group_mask.unsqueeze(-1).expand({T, G, c.n_experts / G}).reshape({T, -1});
        s.choice = s.choice.masked_fill(score_mask.logical_not(),
                                        ctx.v.moe_group_mask_zero ? 0.0 : -std::numeric_limits<double>::infinity());
    }
    return s;
}

torch::Tensor moe_route(const torch::Tensor& x, const MoeTensors& w, const BlockConfig& c, const Ctx& ctx) {
    const MoeScores s = moe_scores(x, w, c, ctx);
    // topk_indices = torch.topk(scores_for_choice, k=top_k, dim=-1)[1]
    // (or the choice given: a kernel judged on the one it took at a near-tie)
    // (the masked groups' zeros tie: a bug's form breaks them lowest index first, as a loop does)
    const auto idx = ctx.route_taken ? taken_indices(*ctx.route_taken, x.size(0), c.n_experts, c.n_experts_per_tok)
                     : ctx.v.moe_group_mask_zero
                         ? std::get<1>(s.choice.sort(/*stable=*/true, -1, /*descending=*/true)).narrow(1, 0, c.n_experts_per_tok)
                         : std::get<1>(torch::topk(s.choice, c.n_experts_per_tok, -1));
    // topk_weights = scores.gather(1, topk_indices)  (the unbiased scores)
    auto weights = (ctx.v.moe_weights_from_choice ? s.choice : s.scores).gather(1, idx);
    // if norm_topk_prob: topk_weights /= topk_weights.sum(dim=-1, keepdim=True) + 1e-20
    if (c.moe_norm_topk_prob) weights = weights / (weights.sum(-1, true) + 1e-20);
    // topk_weights = topk_weights * routed_scaling_factor
    if (c.moe_routed_scaling_factor > 0) weights = weights * c.moe_routed_scaling_factor;
    // The dense [T, E] routing table: the weights at the chosen experts, 0 elsewhere.
    return torch::zeros_like(s.scores).scatter(1, idx, weights);
}

torch::Tensor moe_experts(const torch::Tensor& x, const torch::Tensor& route, const MoeTensors& w,
                          const BlockConfig& c, const Ctx& ctx) {
    const int64_t E = c.n_experts, D = x.size(1), F = c.moe_ffn_dim;
    auto weight_of = [&](const torch::Tensor& slice) { return w.expert_weight ? w.expert_weight(slice) : slice; };
    auto out = torch::zeros_like(x);
    for (int64_t e = 0; e < E; ++e) {
        // token_idx = where(expert_mask[e]): the tokens that chose expert e
        const auto tokens = route.select(1, e).nonzero().reshape({-1});
        if (tokens.numel() == 0) continue;
        const auto weight = route.select(1, e).index_select(0, tokens).unsqueeze(1);  // [n, 1]
        auto xe = x.index_select(0, tokens);                                          // [n, D]
        if (c.moe_weight_on_input) xe = xe * weight;  // Llama4: routed_in = hidden_states * router_scores
        // gate_up = x @ gate_up_proj[e] + gate_up_proj_bias[e]
        auto h = matmul(xe, weight_of(w.w13.narrow(0, e * D, D)), ctx);  // [n, 2F]
        if (c.moe_expert_bias) h = h + w.b13.select(0, e).unsqueeze(0);
        const auto [gate, up] = split_gate_up(h, c.moe_gate_up_interleaved);
        // down_proj(act(gate) * up) + down_proj_bias[e]
        auto y = matmul(gated(gate, up, c.moe_swiglu_limit, !ctx.v.moe_swiglu_no_clamp),
                        weight_of(w.w2.narrow(0, e * F, F)), ctx);  // [n, D]
        const bool late = ctx.v.moe_down_bias_after_weight && !c.moe_weight_on_input;  // a bug's order
        if (c.moe_expert_bias && !late) y = y + w.b2.select(0, e).unsqueeze(0);
        // final_hidden_states.index_add_(0, token_idx, current_hidden_states * routing_weights)
        auto term = c.moe_weight_on_input ? y : y * weight;
        if (c.moe_expert_bias && late) term = term + w.b2.select(0, e).unsqueeze(0);
        out.index_add_(0, tokens, term);
    }
    if (c.moe_shared_ffn_dim > 0) {
        // shared = down(silu(gate(x)) * up(x)); Qwen2-MoE: * sigmoid(shared_expert_gate(x))
        const auto [gate, up] = split_gate_up(matmul(x, w.ws13, ctx), false);
        auto shared = matmul(torch::silu(gate) * up, w.ws2, ctx);
        if (c.moe_shared_gate) shared = shared * torch::sigmoid(matmul(x, w.ws_gate, ctx));
        out = out + shared;
        if (ctx.v.moe_shared_twice) out = out + shared;  // a bug's form
    }
    return out;
}

}  // namespace conform::ref
