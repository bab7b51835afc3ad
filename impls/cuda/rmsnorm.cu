// rmsnorm — y = x * rsqrt(mean(x^2) + eps) * w, one block per row; fused
// with the residual add before it when the block needs h = x + attn @ wo.
#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"  // the contract's shape checks, shared by every implementation

namespace conform::cuda {

namespace {

// ---- kernel -----------------------------------------------------------------------------

// One block per row; each thread takes a strided slice of the row.
//   (ADD) h   = x + residual          stored rounded to T, and normalised as stored
//         ss  = sum(h^2)              per thread, then over the block
//         out = h * (1 / sqrt(ss / cols + eps)) * (w + w_offset)    w_offset 1: Gemma's (1 + w), in float32
template <typename T, bool ADD>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ h_out,
                               const T* __restrict__ w, T* __restrict__ out, int64_t cols, float eps, float w_offset) {
    const int64_t row = blockIdx.x;
    const T* xr = x + row * cols;
    T* outr = out + row * cols;

    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        float xi = to_f32(xr[i]);
        if constexpr (ADD) {
            const T hi = from_f32<T>(xi + to_f32(residual[row * cols + i]));
            h_out[row * cols + i] = hi;
            xi = to_f32(hi);
        }
        ss += xi * xi;
    }
    ss = block_sum(ss);

    // eps inside the sqrt (HF/Meta); a correctly rounded 1/sqrt, not rsqrtf's approximation
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
    // Each thread reads back only the h it wrote itself above: no barrier needed.
    const T* hr = ADD ? h_out + row * cols : xr;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) outr[i] = from_f32<T>(to_f32(hr[i]) * scale * (to_f32(w[i]) + w_offset));
}

template <typename T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------

template <typename T>
void launch_rmsnorm(const T* x, const T* residual, T* h_out, const T* w, T* out, int64_t rows, int64_t cols,
                    float eps, float w_offset, cudaStream_t s) {
    if (rows == 0) return;
    // A warp per 32 columns up to 512 threads: short rows (qk_norm's head_dim)
    // don't idle a big block, long rows (D = 4096) get 8 values per thread.
    const int threads = static_cast<int>(std::min<int64_t>(512, ceil_div(cols, kWarp) * kWarp));
    if (residual)
        CUDA_LAUNCH((rmsnorm_kernel<T, true>), static_cast<unsigned>(rows), threads, 0, s, x, residual, h_out, w, out,
                    cols, eps, w_offset);
    else
        CUDA_LAUNCH((rmsnorm_kernel<T, false>), static_cast<unsigned>(rows), threads, 0, s, x, nullptr, nullptr, w,
                    out, cols, eps, w_offset);
}

template <typename T>
void launch_add(const T* a, const T* b, T* out, int64_t n, cudaStream_t s) {
    if (n == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(n, 256), 4096));
    CUDA_LAUNCH(add_kernel<T>, blocks, 256, 0, s, a, b, out, n);
}

#define INSTANTIATE(T)                                                                                       \
    template void launch_rmsnorm<T>(const T*, const T*, T*, const T*, T*, int64_t, int64_t, float, float, cudaStream_t); \
    template void launch_add<T>(const T*, const T*, T*, int64_t, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(__nv_bfloat16)
INSTANTIATE(__half)
#undef INSTANTIATE

// ---- op entry -------------------------------------------------------------------------------

void op_rmsnorm(const Context& ctx, View x, View w, const RmsNormParams& p, MutView out) {
    namespace chk = scalar::detail;
    const int64_t T = x.rows, D = x.cols;
    chk::expect(D > 0, "rmsnorm", "x must have at least one column, found " + chk::shape_str(T, D));
    chk::expect_shape("rmsnorm", "w", w, 1, D);
    chk::expect_shape("rmsnorm", "out", out, T, D);
    with_storage(ctx.dtype, [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x), dw = upload<S>(ctx, "w", w);
        DeviceBuffer<S> dout("out", static_cast<size_t>(T * D), ctx.stream);
        launch_rmsnorm<S>(dx.data(), nullptr, nullptr, dw.data(), dout.data(), T, D, static_cast<float>(p.eps),
                          p.plus_one ? 1.0f : 0.0f, ctx.stream);
        ctx.sync("rmsnorm");
        download(ctx, dout, out);
        dx.check_guard(ctx.stream);
    });
}

}  // namespace conform::cuda
