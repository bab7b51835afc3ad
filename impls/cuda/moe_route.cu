// moe_route — a mixture of experts' router (DeepseekV3TopkRouter and
// DeepseekV3MoE.route_tokens_to_experts; Mixtral's, Qwen3-MoE's and
// gpt-oss's are its cases without groups or a selection bias): one block per
// token, its threads computing the E logits, thread 0 choosing.
//
// The logits are float32 whatever the storage: DeepSeek and gpt-oss run their
// routers in float32, and a router rounded to bf16 is a served bug
// (vllm#54048). The choice is a few comparisons per expert; one thread
// makes it in the scalar implementation's order (a tie goes to the lower
// expert id, as torch.topk's CUDA kernel and the fused kernels pick it).
#include <cmath>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

constexpr int kRouteThreads = 128;

// ---- kernel -----------------------------------------------------------------------------

// Block t: token t. Dynamic shared memory: s [E] (the scores), choice [E]
// (what the top-k compares), group [n_group].
template <typename T>
__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const T* __restrict__ x, const T* __restrict__ w_router, const T* __restrict__ router_bias,
                     const T* __restrict__ e_bias, T* __restrict__ route, MoeRouteArgs a) {
    CONFORM_DYNAMIC_SHARED(smem);
    float* s = reinterpret_cast<float*>(smem);
    float* choice = s + a.E;
    float* group = choice + a.E;
    const int64_t t = blockIdx.x, D = a.D, E = a.E;
    const T* xt = x + t * D;
    // router_logits = x @ w_router (+ router_bias): expert e's column, one thread each
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
        float l = 0.0f;
        for (int64_t d = 0; d < D; ++d) l += to_f32(xt[d]) * to_f32(w_router[d * E + e]);
        s[e] = a.router_bias ? l + to_f32(router_bias[e]) : l;
    }
    __syncthreads();  // every logit is in s before thread 0 reads them all
    if (threadIdx.x != 0) return;
    const float minus_inf = -INFINITY;
    // (The mutant's bug: the router held in bf16, its logits and its scores rounded.)
    auto held = [&](float v) { return a.router_bf16 ? __bfloat162float(__float2bfloat16(v)) : v; };
    for (int64_t e = 0; e < E; ++e) s[e] = held(s[e]);
    // scores = softmax(logits, dim=-1) | logits.sigmoid()
    if (a.softmax) {
        float m = s[0], sum = 0.0f;
        for (int64_t e = 1; e < E; ++e) m = fmaxf(m, s[e]);
        for (int64_t e = 0; e < E; ++e) sum += (s[e] = expf(s[e] - m));
        for (int64_t e = 0; e < E; ++e) s[e] /= sum;
    } else {
        for (int64_t e = 0; e < E; ++e) s[e] = 1.0f / (1.0f + expf(-s[e]));
    }
    for (int64_t e = 0; e < E; ++e) s[e] = held(s[e]);
    // scores_for_choice = scores + e_score_correction_bias
    for (int64_t e = 0; e < E; ++e) choice[e] = a.selection_bias ? s[e] + to_f32(e_bias[e]) : s[e];
    // Grouped top-k: a group's score is its best choice score (V2) or its
    // two best summed (V3); all but the topk_group best groups masked (-inf).
    if (a.n_group > 0) {
        const int64_t G = a.n_group, size = E / G;
        for (int64_t g = 0; g < G; ++g) {
            float first = minus_inf, second = minus_inf;
            for (int64_t i = g * size; i < (g + 1) * size; ++i) {
                if (choice[i] > first) second = first, first = choice[i];
                else if (choice[i] > second) second = choice[i];
            }
            group[g] = a.group_max || size < 2 ? first : first + second;
        }
        // The kept groups are marked +inf in `group` once taken (scores are finite).
        for (int64_t n = 0; n < a.topk_group; ++n) {
            int64_t best = -1;
            for (int64_t g = 0; g < G; ++g)
                if (group[g] != INFINITY && (best < 0 || group[g] > group[best])) best = g;
            group[best] = INFINITY;
        }
        for (int64_t e = 0; e < E; ++e)
            if (group[e / size] != INFINITY) choice[e] = minus_inf;
    }
    // topk(scores_for_choice, k): the K largest, one at a time, each among
    // the experts not taken yet (a masked -inf expert may still be taken, as
    // torch.topk takes it, when K exceeds the kept groups' experts; a taken
    // one never again: vllm-omni#7175 re-selected one).
    T* rt = route + t * E;
    for (int64_t e = 0; e < E; ++e) rt[e] = from_f32<T>(0.0f);
    float sum = 0.0f;
    int64_t chosen[kMaxMoeTopK];
    auto taken = [&](int64_t e, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
            if (chosen[i] == e) return true;
        return false;
    };
    for (int64_t k = 0; k < a.K; ++k) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; ++e)
            if (!taken(e, k) && (best < 0 || choice[e] > choice[best])) best = e;
        chosen[k] = best;
        sum += s[best];
    }
    // topk_weights = scores.gather(1, topk_indices); renormalised (+ 1e-20); * routed_scaling_factor
    for (int64_t k = 0; k < a.K; ++k) {
        float v = a.renorm ? s[chosen[k]] / (sum + 1e-20f) : s[chosen[k]];
        if (a.rsf > 0) v *= a.rsf;
        rt[chosen[k]] = from_f32<T>(v);
    }
}

}  // namespace

// ---- launcher --------------------------------------------------------------------------------

template <typename T>
void launch_moe_route(const T* x, const T* w_router, const T* router_bias, const T* e_bias, T* route,
                      const MoeRouteArgs& a, cudaStream_t s) {
    if (a.T == 0) return;
    const size_t smem = static_cast<size_t>(2 * a.E + a.n_group) * sizeof(float);
    CUDA_LAUNCH(moe_route_kernel<T>, static_cast<unsigned>(a.T), kRouteThreads, smem, s, x, w_router, router_bias,
                e_bias, route, a);
}

template void launch_moe_route<float>(const float*, const float*, const float*, const float*, float*,
                                      const MoeRouteArgs&, cudaStream_t);
template void launch_moe_route<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                              const __nv_bfloat16*, __nv_bfloat16*, const MoeRouteArgs&, cudaStream_t);
template void launch_moe_route<__half>(const __half*, const __half*, const __half*, const __half*, __half*,
                                       const MoeRouteArgs&, cudaStream_t);

// ---- op entry --------------------------------------------------------------------------------

MoeRouteArgs moe_route_args(const BlockConfig& c, int64_t T) {
    MoeRouteArgs a;
    a.T = T;
    a.D = c.d_model;
    a.E = c.n_experts;
    a.K = c.n_experts_per_tok;
    a.softmax = c.moe_scoring == MoeScoring::softmax;
    a.router_bias = c.moe_router_bias;
    a.selection_bias = c.moe_selection_bias;
    a.n_group = c.moe_n_group;
    a.topk_group = c.moe_topk_group;
    a.group_max = c.moe_group_score == MoeGroupScore::max;
    a.renorm = c.moe_norm_topk_prob;
    a.rsf = static_cast<float>(c.moe_routed_scaling_factor);
    return a;
}

template <typename T>
void run_route(const Context& ctx, const DeviceBuffer<T>& x, const MoeWeights& w, const BlockConfig& c,
               DeviceBuffer<T>& route) {
    const int64_t T_rows = static_cast<int64_t>(x.size()) / c.d_model;
    const DeviceBuffer<T> wr = upload<T>(ctx, "w_router", w.w_router);
    DeviceBuffer<T> rb, eb;
    if (c.moe_router_bias) rb = upload<T>(ctx, "router_bias", w.router_bias);
    if (c.moe_selection_bias) eb = upload<T>(ctx, "e_bias", w.e_bias);
    MoeRouteArgs a = moe_route_args(c, T_rows);
    a.router_bf16 = ctx.faults.router_bf16;
    launch_moe_route<T>(x.data(), wr.data(), rb.data(), eb.data(), route.data(), a, ctx.stream);
    ctx.sync("moe_route");
}

template void run_route<float>(const Context&, const DeviceBuffer<float>&, const MoeWeights&, const BlockConfig&,
                               DeviceBuffer<float>&);
template void run_route<__nv_bfloat16>(const Context&, const DeviceBuffer<__nv_bfloat16>&, const MoeWeights&,
                                       const BlockConfig&, DeviceBuffer<__nv_bfloat16>&);
template void run_route<__half>(const Context&, const DeviceBuffer<__half>&, const MoeWeights&, const BlockConfig&,
                                DeviceBuffer<__half>&);

void op_moe_route(const Context& ctx, View x, const MoeWeights& w, const BlockConfig& c, MutView route) {
    namespace chk = scalar::detail;
    const int64_t T = x.rows;
    chk::expect_shape("moe_route", "x", x, T, c.d_model);
    chk::expect_shape("moe_route", "route", route, T, c.n_experts);
    scalar::check_moe_weights("moe_route", w, c, true, false);
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        DeviceBuffer<S> droute("route", static_cast<size_t>(T * c.n_experts), ctx.stream);
        run_route<S>(ctx, dx, w, c, droute);
        download(ctx, droute, route);
        round_output(ctx.dtype, route);
    });
}

}  // namespace conform::cuda
