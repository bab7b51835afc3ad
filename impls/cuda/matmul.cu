// matmul — y = x @ W with W stored [in, out], through cuBLAS: float32
// accumulation whatever the storage type (CUBLAS_COMPUTE_32F; no TF32, which
// would round the float32 operands to 10 mantissa bits).
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace conform::cuda {

namespace {

template <typename T>
constexpr cudaDataType blas_type();
template <>
constexpr cudaDataType blas_type<float>() {
    return CUDA_R_32F;
}
template <>
constexpr cudaDataType blas_type<__nv_bfloat16>() {
    return CUDA_R_16BF;
}
template <>
constexpr cudaDataType blas_type<__half>() {
    return CUDA_R_16F;
}

int as_int(int64_t v, const char* what) {
    if (v < 0 || v > INT32_MAX) throw ImplError(std::string("cuda gemm: ") + what + " = " + std::to_string(v) + " does not fit cuBLAS's int");
    return static_cast<int>(v);
}

// y[r, :] = bias for every row: the C that cuBLAS's beta = 1 then adds.
template <typename T>
__global__ void broadcast_rows_kernel(const T* __restrict__ bias, T* __restrict__ y, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = bias[i % cols];
}

}  // namespace

// y = x @ W + bias (nn.Linear with a bias): y starts as the bias in every row
// and the product accumulates onto it, alpha·acc + beta·y in float32 with one
// rounding to T at the store, as cuBLASLt's bias epilogue would.
template <typename T>
void gemm_bias(const Context& ctx, const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t K, int64_t N) {
    if (M == 0 || N == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(M * N, 256), 4096));
    CUDA_LAUNCH(broadcast_rows_kernel<T>, blocks, 256, 0, ctx.stream, bias, y, M, N);
    gemm<T>(ctx, x, w, y, M, K, N, true);
}

template <typename T>
void gemm(const Context& ctx, const T* x, const T* w, T* y, int64_t M, int64_t K, int64_t N, bool accumulate) {
    if (M == 0 || N == 0) return;
    // cuBLAS is column-major. Row-major y[M, N] = x[M, K] @ w[K, N] is, read
    // column-major, y^T[N, M] = w^T[N, K] @ x^T[K, M]: w as the first operand
    // with leading dimension N, x as the second with K, y with N.
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const int m = as_int(N, "N"), n = as_int(M, "M"), k = as_int(K, "K");
    CUBLAS_CHECK(cublasGemmEx(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, w, blas_type<T>(), m, x,
                              blas_type<T>(), k, &beta, y, blas_type<T>(), m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template void gemm<float>(const Context&, const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
template void gemm<__nv_bfloat16>(const Context&, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int64_t,
                                  int64_t, int64_t, bool);
template void gemm<__half>(const Context&, const __half*, const __half*, __half*, int64_t, int64_t, int64_t, bool);

template void gemm_bias<float>(const Context&, const float*, const float*, const float*, float*, int64_t, int64_t,
                               int64_t);
template void gemm_bias<__nv_bfloat16>(const Context&, const __nv_bfloat16*, const __nv_bfloat16*,
                                       const __nv_bfloat16*, __nv_bfloat16*, int64_t, int64_t, int64_t);
template void gemm_bias<__half>(const Context&, const __half*, const __half*, const __half*, __half*, int64_t, int64_t,
                                int64_t);

}  // namespace conform::cuda
