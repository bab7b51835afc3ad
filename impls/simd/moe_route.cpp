// moe_route — a mixture of experts' router: the router's product over the
// pool (x @ w_router + router_bias, every token's logits at once), then each
// token's scoring, choice and weights by the rule scalar's router applies
// after its own product (scalar::moe_route_row): that part is O(T E) next to
// the product's O(T D E), and one rule for both keeps the choice's tie-breaks
// (lowest index first) the same.
#include <vector>

#include "conform/dtype.h"
#include "scalar/scalar.h"
#include "simd/ops.h"

namespace conform::simd {

void moe_route(ThreadPool& pool, Target t, View x, const MoePacked& p, const MoeWeights& w, const BlockConfig& c,
               MutView route) {
    const size_t T = static_cast<size_t>(x.rows), E = static_cast<size_t>(c.n_experts);
    // router_logits = x @ w_router (+ router_bias)             [T, E]
    const PackedWeight& wr = p.router;
    Buffer logits(Elem::f32, T, E);
    GemmScratch scratch;
    const CRows xr{x.data, static_cast<size_t>(x.cols), Elem::f32};
    if (c.moe_router_bias)
        matmul(pool, t, xr, T, wr, {Epilogue::bias, logits.m(), {}, {}, w.router_bias.data}, scratch);
    else
        matmul(pool, t, xr, T, wr, {Epilogue::store, logits.m(), {}, {}}, scratch);
    // topk over the scores, per token                          route[T, E]
    float* l = static_cast<float*>(logits.data());
    pool.Run(T, [&](size_t i, int) {
        scalar::moe_route_row(l + i * E, w, c, route.data + i * E);
        // routing_weights.to(hidden_states.dtype): a bf16 engine stores them in bf16
        if (p.storage != Elem::f32)
            for (size_t e = 0; e < E; ++e) route.data[i * E + e] = round_bf16(route.data[i * E + e]);
    });
}

}  // namespace conform::simd
