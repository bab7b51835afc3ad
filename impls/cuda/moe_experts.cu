// moe_experts — a mixture of experts' experts and their combine, given the
// route (MixtralSparseMoeBlock's loop over experts, GptOssExperts,
// DeepseekV3MoE.moe + shared_experts): one block per token, its experts in
// id order, each in three passes over the block's threads —
//   h   = x @ w13_e (+ b13_e)                 [2F]  gate | up, or interleaved
//   act = silu(gate) * up | gpt-oss's clamped form          [F]
//   out += r * (act @ w2_e (+ b2_e))          [D]   (r on the input instead: Llama 4)
// then the shared expert the same way, times sigmoid(x @ ws_gate) where gated.
// A token's sum is in a fixed order (its experts by id, then the shared), so
// its row does not depend on the batch. h, act and the running sum are
// stored in T (bf16: as an engine stores them); products accumulate in float32.
#include <vector>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

constexpr int kExpertThreads = 128;

// ---- kernel -----------------------------------------------------------------------------

// One expert of token t: its weight r (on the input where on_input, else on
// the output; `gate` multiplies the output either way), added into o.
template <typename T>
__device__ void expert_into(const T* __restrict__ xt, int64_t D, int64_t F, const T* __restrict__ w13,
                            const T* __restrict__ b13, const T* __restrict__ w2, const T* __restrict__ b2,
                            bool interleaved, float limit, float r, bool on_input, T* __restrict__ h,
                            T* __restrict__ act, T* __restrict__ o) {
    // h = (r) x @ w13 (+ b13): column j per thread
    for (int64_t j = threadIdx.x; j < 2 * F; j += blockDim.x) {
        float acc = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float xv = on_input ? r * to_f32(xt[d]) : to_f32(xt[d]);
            acc += xv * to_f32(w13[d * 2 * F + j]);
        }
        h[j] = from_f32<T>(b13 ? acc + to_f32(b13[j]) : acc);
    }
    __syncthreads();  // all of h is written before a thread reads its gate and up, which other threads wrote
    for (int64_t i = threadIdx.x; i < F; i += blockDim.x) {
        float gate = to_f32(interleaved ? h[2 * i] : h[i]);
        float up = to_f32(interleaved ? h[2 * i + 1] : h[F + i]);
        float a;
        if (limit > 0) {
            // gpt-oss: min(gate, L) * sigmoid(1.702 min(gate, L)) * (clamp(up, -L, L) + 1)
            gate = fminf(gate, limit);
            up = fmaxf(-limit, fminf(up, limit));
            a = gate / (1.0f + expf(-1.702f * gate)) * (up + 1.0f);
        } else {
            a = gate / (1.0f + expf(-gate)) * up;  // silu(gate) * up
        }
        act[i] = from_f32<T>(a);
    }
    __syncthreads();  // all of act is written before the down product reads every element of it
    const float w_out = on_input ? 1.0f : r;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t i = 0; i < F; ++i) acc += to_f32(act[i]) * to_f32(w2[i * D + d]);
        const float y = to_f32(from_f32<T>(b2 ? acc + to_f32(b2[d]) : acc));  // the expert's output, stored
        o[d] = from_f32<T>(to_f32(o[d]) + w_out * y);
    }
    // No barrier here: the next expert first writes h, which no thread reads
    // any more (each passed the barrier after act), and writes act only after
    // its own first barrier, which every thread reaches once done with this one.
}

// Block t: token t. h [T, 2 Fmax] and act [T, Fmax]: row t is the block's scratch.
template <typename T>
__global__ void __launch_bounds__(kExpertThreads)
    moe_experts_kernel(const T* __restrict__ x, const T* __restrict__ route, MoeExpertWeights<T> w,
                       T* __restrict__ h, T* __restrict__ act, T* __restrict__ out, MoeExpertArgs a) {
    const int64_t t = blockIdx.x, D = a.D, E = a.E, F = a.F, Fmax = a.F > a.Fs ? a.F : a.Fs;
    const T* xt = x + t * D;
    T* o = out + t * D;
    T* ht = h + t * 2 * Fmax;
    T* at = act + t * Fmax;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) o[d] = from_f32<T>(0.0f);
    // (Each thread adds only into the o[d] it zeroed: no barrier needed before the first expert.)
    for (int64_t e = 0; e < E; ++e) {
        const float r = to_f32(route[t * E + e]);
        if (r == 0.0f) continue;  // not chosen (the same for every thread: the barriers inside stay uniform)
        expert_into<T>(xt, D, F, w.w13 + e * D * 2 * F, a.expert_bias ? w.b13 + e * 2 * F : nullptr, w.w2 + e * F * D,
                       a.expert_bias ? w.b2 + e * D : nullptr, a.interleaved, a.limit, r, a.weight_on_input, ht, at,
                       o);
    }
    if (a.Fs > 0) {
        // shared_experts(x) (Qwen2-MoE: * sigmoid(shared_expert_gate(x)))
        float g = 1.0f;
        if (a.shared_gate) {
            float z = 0.0f;
            for (int64_t d = threadIdx.x; d < D; d += blockDim.x) z += to_f32(xt[d]) * to_f32(w.ws_gate[d]);
            z = block_sum(z);
            g = 1.0f / (1.0f + expf(-z));
        }
        expert_into<T>(xt, D, a.Fs, w.ws13, nullptr, w.ws2, nullptr, false, 0.0f, g, false, ht, at, o);
    }
}

}  // namespace

// ---- launcher --------------------------------------------------------------------------------

template <typename T>
void launch_moe_experts(const T* x, const T* route, const MoeExpertWeights<T>& w, T* h, T* act, T* out,
                        const MoeExpertArgs& a, cudaStream_t s) {
    if (a.T == 0) return;
    CUDA_LAUNCH(moe_experts_kernel<T>, static_cast<unsigned>(a.T), kExpertThreads, 0, s, x, route, w, h, act, out, a);
}

template void launch_moe_experts<float>(const float*, const float*, const MoeExpertWeights<float>&, float*, float*,
                                        float*, const MoeExpertArgs&, cudaStream_t);
template void launch_moe_experts<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                const MoeExpertWeights<__nv_bfloat16>&, __nv_bfloat16*,
                                                __nv_bfloat16*, __nv_bfloat16*, const MoeExpertArgs&, cudaStream_t);
template void launch_moe_experts<__half>(const __half*, const __half*, const MoeExpertWeights<__half>&, __half*,
                                         __half*, __half*, const MoeExpertArgs&, cudaStream_t);

// ---- op entry --------------------------------------------------------------------------------

MoeExpertArgs moe_expert_args(const BlockConfig& c, int64_t T) {
    MoeExpertArgs a;
    a.T = T;
    a.D = c.d_model;
    a.E = c.n_experts;
    a.F = c.moe_ffn_dim;
    a.Fs = c.moe_shared_ffn_dim;
    a.interleaved = c.moe_gate_up_interleaved;
    a.weight_on_input = c.moe_weight_on_input;
    a.expert_bias = c.moe_expert_bias;
    a.shared_gate = c.moe_shared_gate;
    a.limit = static_cast<float>(c.moe_swiglu_limit);
    return a;
}

template <typename T>
void run_experts(const Context& ctx, const DeviceBuffer<T>& x, const DeviceBuffer<T>& route, const MoeWeights& w,
                 const BlockConfig& c, MutView out) {
    const MoeExpertArgs a = moe_expert_args(c, out.rows);
    const int64_t Fmax = std::max(a.F, a.Fs);
    auto maybe = [&](bool on, const char* name, View v) { return on ? upload<T>(ctx, name, v) : DeviceBuffer<T>(); };
    const DeviceBuffer<T> w13 = upload<T>(ctx, "w13", w.w13), w2 = upload<T>(ctx, "w2", w.w2);
    const DeviceBuffer<T> b13 = maybe(a.expert_bias, "b13", w.b13), b2 = maybe(a.expert_bias, "b2", w.b2);
    const DeviceBuffer<T> ws13 = maybe(a.Fs > 0, "ws13", w.ws13), ws2 = maybe(a.Fs > 0, "ws2", w.ws2);
    const DeviceBuffer<T> wsg = maybe(a.shared_gate, "ws_gate", w.ws_gate);
    DeviceBuffer<T> h("gate|up", static_cast<size_t>(a.T * 2 * Fmax), ctx.stream);
    DeviceBuffer<T> act("act", static_cast<size_t>(a.T * Fmax), ctx.stream);
    DeviceBuffer<T> dout("out", static_cast<size_t>(a.T * a.D), ctx.stream);
    const MoeExpertWeights<T> dw{w13.data(), b13.data(), w2.data(), b2.data(), ws13.data(), ws2.data(), wsg.data()};
    launch_moe_experts<T>(x.data(), route.data(), dw, h.data(), act.data(), dout.data(), a, ctx.stream);
    ctx.sync("moe_experts");
    download(ctx, dout, out);
    round_output(ctx.dtype, out);
    h.check_guard(ctx.stream);
    act.check_guard(ctx.stream);
}

template void run_experts<float>(const Context&, const DeviceBuffer<float>&, const DeviceBuffer<float>&,
                                 const MoeWeights&, const BlockConfig&, MutView);
template void run_experts<__nv_bfloat16>(const Context&, const DeviceBuffer<__nv_bfloat16>&,
                                         const DeviceBuffer<__nv_bfloat16>&, const MoeWeights&, const BlockConfig&,
                                         MutView);
template void run_experts<__half>(const Context&, const DeviceBuffer<__half>&, const DeviceBuffer<__half>&,
                                  const MoeWeights&, const BlockConfig&, MutView);

void op_moe_experts(const Context& ctx, View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) {
    namespace chk = scalar::detail;
    const int64_t T = x.rows;
    chk::expect_shape("moe_experts", "x", x, T, c.d_model);
    chk::expect_shape("moe_experts", "route", route, T, c.n_experts);
    chk::expect_shape("moe_experts", "out", out, T, c.d_model);
    scalar::check_moe_weights("moe_experts", w, c, false, true);
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        const DeviceBuffer<S> droute = upload<S>(ctx, "route", route);
        run_experts<S>(ctx, dx, droute, w, c, out);
    });
}

}  // namespace conform::cuda
