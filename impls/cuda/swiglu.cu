// swiglu — the Llama feed-forward, w2(silu(w1(x)) * w3(x)) (Gemma's GeGLU: gelu_tanh
// for silu, config.hidden_act): the gate and up
// products as one GEMM against the packed [w1 | w3], then the activation in
// one pass over its [T, 2F] result, then the down product.
#include <vector>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

// ---- kernel -----------------------------------------------------------------------------

// g[t, f] = act(gu[t, f]) * gu[t, F + f],   act(a) = a / (1 + exp(-z)) with
//   silu:      z = a
//   gelu_tanh: z = 2 sqrt(2/pi) (a + 0.044715 a^3)   (F.gelu(a, approximate="tanh"), as 1 + tanh(z/2) = 2 sigmoid(z))
// (for a -> -inf, exp(-z) = inf and a / inf = -0: no NaN)
template <typename T>
__global__ void swiglu_act_kernel(const T* __restrict__ gu, T* __restrict__ g, int64_t tokens, int64_t F,
                                  bool gelu_tanh) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < tokens * F;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = i / F, f = i % F;
        const float gate = to_f32(gu[t * 2 * F + f]);
        const float up = to_f32(gu[t * 2 * F + F + f]);
        const float z = gelu_tanh ? 1.5957691216057308f * (gate + 0.044715f * gate * gate * gate) : gate;
        g[i] = from_f32<T>(gate / (1.0f + expf(-z)) * up);
    }
}

}  // namespace

// ---- launcher --------------------------------------------------------------------------------

template <typename T>
void launch_swiglu_act(const T* gu, T* g, int64_t tokens, int64_t F, HiddenAct act, cudaStream_t s) {
    if (tokens * F == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(tokens * F, 256), 8192));
    CUDA_LAUNCH(swiglu_act_kernel<T>, blocks, 256, 0, s, gu, g, tokens, F, act == HiddenAct::gelu_tanh);
}

template void launch_swiglu_act<float>(const float*, float*, int64_t, int64_t, HiddenAct, cudaStream_t);
template void launch_swiglu_act<__nv_bfloat16>(const __nv_bfloat16*, __nv_bfloat16*, int64_t, int64_t, HiddenAct,
                                               cudaStream_t);
template void launch_swiglu_act<__half>(const __half*, __half*, int64_t, int64_t, HiddenAct, cudaStream_t);

// ---- op entry --------------------------------------------------------------------------------

// w13[D, 2F], row r = [w1[r] | w3[r]]: x @ w13 = [x @ w1 | x @ w3] in one product.
std::vector<float> pack_gate_up(View w1, View w3) {
    const int64_t D = w1.rows, F = w1.cols;
    std::vector<float> w13(static_cast<size_t>(D * 2 * F));
    for (int64_t r = 0; r < D; ++r) {
        std::copy(w1.row(r), w1.row(r) + F, w13.begin() + r * 2 * F);
        std::copy(w3.row(r), w3.row(r) + F, w13.begin() + r * 2 * F + F);
    }
    return w13;
}

void op_swiglu(const Context& ctx, View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) {
    namespace chk = scalar::detail;
    const int64_t T = x.rows, D = x.cols, F = w1.cols;
    chk::expect_shape("swiglu", "w1", w1, D, F);
    chk::expect_shape("swiglu", "w3", w3, D, F);
    chk::expect_shape("swiglu", "w2", w2, F, D);
    chk::expect_shape("swiglu", "out", out, T, D);
    const std::vector<float> w13 = pack_gate_up(w1, w3);
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        const DeviceBuffer<S> dw13 = upload<S>(ctx, "w13", w13.data(), w13.size());
        const DeviceBuffer<S> dw2 = upload<S>(ctx, "w2", w2);
        DeviceBuffer<S> gu("gate|up", static_cast<size_t>(T * 2 * F), ctx.stream);
        DeviceBuffer<S> g("gated", static_cast<size_t>(T * F), ctx.stream);
        DeviceBuffer<S> dout("out", static_cast<size_t>(T * D), ctx.stream);
        gemm<S>(ctx, dx.data(), dw13.data(), gu.data(), T, D, 2 * F);  // [a | b] = x @ [w1 | w3]
        launch_swiglu_act<S>(gu.data(), g.data(), T, F, p.act, ctx.stream);  // g = act(a) * b
        gemm<S>(ctx, g.data(), dw2.data(), dout.data(), T, F, D);      // out = g @ w2
        ctx.sync("swiglu");
        download(ctx, dout, out);
        round_output(ctx.dtype, out);
        gu.check_guard(ctx.stream);
        g.check_guard(ctx.stream);
    });
}

}  // namespace conform::cuda
